// Every argument rule of fa3_backward and fa3_backward_workspace_size, checked on the CPU:
// each broken rule gives its status and its sentence, and fa3_backward then makes no driver
// call at all (nothing launched, nothing allocated). The workspace's layout, the choice of the
// kernel, and the handle's own workspace (grown per stream) against the fake CUDA driver
// (test/fake_cuda). Descriptors point at made-up addresses that are never dereferenced.
#include <catch2/catch.hpp>

#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "fa3/fa3.h"
#include "kernels/bwd_config.h"
#include "kernels/bwd_params.h"
#include "runtime/backward_launch.h"
#include "runtime/backward_problem.h"
#include "runtime/handle.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_rules.h"
#include "runtime/tuning_table.h"
#include "support/fake_cuda_client.h"
#include "tile/fragment_order.h"

namespace {

constexpr uintptr_t kQ = 0x100000000, kK = 0x200000000, kV = 0x300000000, kO = 0x400000000,
                    kLse = 0x500000000, kDout = 0x600000000, kDq = 0x700000000,
                    kDk = 0x800000000, kDv = 0x900000000, kWorkspace = 0xa00000000;

fa3_tensor tensor(uintptr_t addr, int64_t b, int64_t s, int64_t h, int64_t d) {
  fa3_tensor t{};
  t.data = reinterpret_cast<void*>(addr);
  t.dtype = FA3_BF16;
  t.batch = b; t.seqlen = s; t.heads = h; t.head_dim = d;
  t.stride_head = d; t.stride_seq = h * d; t.stride_batch = s * h * d;
  return t;
}

// The workspace of Args' problem: batch 2 x heads 8 x 160 rows (100 rounded up to whole
// 128-row blocks, 128, and to whole 80-row blocks, 160: the larger) = 2560 rows; lse_log2
// and dpsum 10240 bytes each, dq_accum 2560 x 128 x 4 bytes, then 2560 / 64 semaphores and
// the _pt kernels' tile counter.
constexpr size_t kArgsWorkspaceBytes = 10240 + 10240 + 2560 * 128 * 4 + 40 * 4 + 4;

struct Args {
  fa3_tensor q = tensor(kQ, 2, 100, 8, 128), k = tensor(kK, 2, 300, 2, 128),
             v = tensor(kV, 2, 300, 2, 128), o = tensor(kO, 2, 100, 8, 128),
             dout = tensor(kDout, 2, 100, 8, 128), dq = tensor(kDq, 2, 100, 8, 128),
             dk = tensor(kDk, 2, 300, 2, 128), dv = tensor(kDv, 2, 300, 2, 128);
  float* lse = reinterpret_cast<float*>(kLse);
  fa3_params p{0.0f, 1, 0};
  const fa3_params* params = &p;
  void* workspace = reinterpret_cast<void*>(kWorkspace);
  size_t workspace_bytes = kArgsWorkspaceBytes;
  std::string null_descriptor;  // the descriptor passed as NULL ("q", "dk", ...)

  template <class T>
  T* pass(const char* name, T* t) const { return null_descriptor == name ? nullptr : t; }

  fa3::Error check(fa3::BackwardProblem* prob = nullptr) {
    fa3::BackwardProblem local;
    fa3::BackwardProblem* out = prob ? prob : &local;
    fa3::Error e = fa3::check_backward(pass("q", &q), pass("k", &k), pass("v", &v), pass("o", &o),
                                       pass("dout", &dout), lse, pass("dq", &dq), pass("dk", &dk),
                                       pass("dv", &dv), params, out);
    if (!e.failed())
      e = fa3::check_backward_workspace(*out, workspace, workspace_bytes, &q, &k, &v, &o, &dout,
                                        lse, &dq, &dk, &dv);
    return e;
  }
  fa3_status run(fa3_handle* h, void* stream = nullptr) {
    return fa3_backward(h, pass("q", &q), pass("k", &k), pass("v", &v), pass("o", &o),
                        pass("dout", &dout), lse, pass("dq", &dq), pass("dk", &dk),
                        pass("dv", &dv), params, workspace, workspace_bytes, stream);
  }
  std::vector<fa3_tensor*> all() { return {&q, &k, &v, &o, &dout, &dq, &dk, &dv}; }
  std::vector<fa3_tensor*> like_q() { return {&q, &o, &dout, &dq}; }
  std::vector<fa3_tensor*> like_k() { return {&k, &v, &dk, &dv}; }
};

struct Rule {
  const char* what;
  std::function<void(Args&)> breaks;
  fa3_status status;
  const char* message;  // exact sentence
};

const char* const kAlias =
    "dq, dk and dv must not share memory with an input or with each other";

std::string alias(const std::string& a, const std::string& b) {
  return a + " overlaps " + b + " in memory: " + kAlias;
}

const Rule kRules[] = {
    {"q descriptor null", [](Args& a) { a.null_descriptor = "q"; }, FA3_ERR_INVALID_ARGUMENT,
     "q is NULL: pass a tensor descriptor"},
    {"dout descriptor null", [](Args& a) { a.null_descriptor = "dout"; }, FA3_ERR_INVALID_ARGUMENT,
     "dout is NULL: pass a tensor descriptor"},
    {"dk descriptor null", [](Args& a) { a.null_descriptor = "dk"; }, FA3_ERR_INVALID_ARGUMENT,
     "dk is NULL: pass a tensor descriptor"},
    {"k data null", [](Args& a) { a.k.data = nullptr; }, FA3_ERR_INVALID_ARGUMENT, "k->data is NULL"},
    {"v data null", [](Args& a) { a.v.data = nullptr; }, FA3_ERR_INVALID_ARGUMENT, "v->data is NULL"},
    {"o data null", [](Args& a) { a.o.data = nullptr; }, FA3_ERR_INVALID_ARGUMENT, "o->data is NULL"},
    {"dq data null", [](Args& a) { a.dq.data = nullptr; }, FA3_ERR_INVALID_ARGUMENT, "dq->data is NULL"},
    {"dv data null", [](Args& a) { a.dv.data = nullptr; }, FA3_ERR_INVALID_ARGUMENT, "dv->data is NULL"},
    {"f32", [](Args& a) { a.q.dtype = FA3_F32; }, FA3_ERR_INVALID_ARGUMENT,
     "q->dtype must be FA3_F16 or FA3_BF16 (got FA3_F32)"},
    {"e4m3", [](Args& a) { a.q.dtype = FA3_E4M3; }, FA3_ERR_UNSUPPORTED,
     "q->dtype is FA3_E4M3: fa3_backward takes FA3_F16 or FA3_BF16 tensors"},
    {"k dtype", [](Args& a) { a.k.dtype = FA3_F16; }, FA3_ERR_INVALID_ARGUMENT,
     "k->dtype (FA3_F16) must equal q->dtype (FA3_BF16)"},
    {"v dtype", [](Args& a) { a.v.dtype = FA3_F16; }, FA3_ERR_INVALID_ARGUMENT,
     "v->dtype (FA3_F16) must equal q->dtype (FA3_BF16)"},
    {"o dtype", [](Args& a) { a.o.dtype = FA3_F32; }, FA3_ERR_INVALID_ARGUMENT,
     "o->dtype (FA3_F32) must equal q->dtype (FA3_BF16)"},
    {"dout dtype", [](Args& a) { a.dout.dtype = FA3_F16; }, FA3_ERR_INVALID_ARGUMENT,
     "dout->dtype (FA3_F16) must equal q->dtype (FA3_BF16)"},
    {"dq dtype", [](Args& a) { a.dq.dtype = FA3_F32; }, FA3_ERR_INVALID_ARGUMENT,
     "dq->dtype (FA3_F32) must equal q->dtype (FA3_BF16)"},
    {"dk dtype", [](Args& a) { a.dk.dtype = FA3_F16; }, FA3_ERR_INVALID_ARGUMENT,
     "dk->dtype (FA3_F16) must equal q->dtype (FA3_BF16)"},
    {"dv dtype", [](Args& a) { a.dv.dtype = FA3_E4M3; }, FA3_ERR_INVALID_ARGUMENT,
     "dv->dtype (FA3_E4M3) must equal q->dtype (FA3_BF16)"},
    {"zero batch", [](Args& a) { a.q.batch = 0; }, FA3_ERR_INVALID_ARGUMENT,
     "q->batch must be >= 1 (got 0)"},
    {"negative k seqlen", [](Args& a) { a.k.seqlen = -5; }, FA3_ERR_INVALID_ARGUMENT,
     "k->seqlen must be >= 1 (got -5)"},
    {"zero v heads", [](Args& a) { a.v.heads = 0; }, FA3_ERR_INVALID_ARGUMENT,
     "v->heads must be >= 1 (got 0)"},
    {"zero dout seqlen", [](Args& a) { a.dout.seqlen = 0; }, FA3_ERR_INVALID_ARGUMENT,
     "dout->seqlen must be >= 1 (got 0)"},
    {"zero dk heads", [](Args& a) { a.dk.heads = 0; }, FA3_ERR_INVALID_ARGUMENT,
     "dk->heads must be >= 1 (got 0)"},
    {"huge seqlen", [](Args& a) { for (fa3_tensor* t : a.like_q()) t->seqlen = int64_t{1} << 31; },
     FA3_ERR_INVALID_ARGUMENT, "q->seqlen must be at most 2147483647 (got 2147483648)"},
    {"q seqlen past whole blocks",
     [](Args& a) {
       for (fa3_tensor* t : a.all()) t->batch = 1;
       for (fa3_tensor* t : a.like_q()) t->seqlen = 2147483600;
     },
     FA3_ERR_INVALID_ARGUMENT,
     "q->seqlen must be at most 2147483392 for fa3_backward (got 2147483600): rounded up to whole blocks it must stay below 2^31"},
    {"k seqlen past whole blocks",
     [](Args& a) {
       for (fa3_tensor* t : a.all()) t->batch = 1;
       for (fa3_tensor* t : a.like_k()) t->seqlen = 2147483600;
     },
     FA3_ERR_INVALID_ARGUMENT,
     "k->seqlen must be at most 2147483392 for fa3_backward (got 2147483600): rounded up to whole blocks it must stay below 2^31"},
    {"head dim 96", [](Args& a) { for (fa3_tensor* t : a.all()) t->head_dim = 96; },
     FA3_ERR_UNSUPPORTED, "q->head_dim must be 64, 128 or 256 for fa3_backward (got 96)"},
    {"k head dim", [](Args& a) { a.k.head_dim = 64; }, FA3_ERR_INVALID_ARGUMENT,
     "k->head_dim (64) must equal q->head_dim (128)"},
    {"k batch", [](Args& a) { a.k.batch = 3; }, FA3_ERR_INVALID_ARGUMENT,
     "k->batch (3) must equal q->batch (2)"},
    {"gqa", [](Args& a) { for (fa3_tensor* t : a.like_k()) t->heads = 3; }, FA3_ERR_INVALID_ARGUMENT,
     "q->heads (8) must be a multiple of k->heads (3) (grouped-query attention)"},
    {"q misaligned", [](Args& a) { a.q.data = reinterpret_cast<char*>(kQ) + 8; },
     FA3_ERR_INVALID_ARGUMENT, "q->data (0x100000008) must be 16-byte aligned (TMA)"},
    {"k stride not 16B", [](Args& a) { a.k.stride_seq = 2 * 128 + 4; }, FA3_ERR_INVALID_ARGUMENT,
     "k->stride_seq (260 elements = 520 bytes) must be a multiple of 16 bytes (TMA)"},
    {"v negative stride", [](Args& a) { a.v.stride_batch = -300 * 2 * 128; },
     FA3_ERR_INVALID_ARGUMENT, "v->stride_batch must be positive when v->batch > 1 (got -76800)"},
    {"dout misaligned", [](Args& a) { a.dout.data = reinterpret_cast<char*>(kDout) + 4; },
     FA3_ERR_INVALID_ARGUMENT, "dout->data (0x600000004) must be 16-byte aligned (TMA)"},
    {"dout stride past 2^40", [](Args& a) { a.dout.stride_batch = int64_t{1} << 39; },
     FA3_ERR_INVALID_ARGUMENT,
     "dout->stride_batch (549755813888 elements) must be below 2^40 bytes (TMA)"},
    {"q address overflow",
     [](Args& a) { a.q.data = reinterpret_cast<void*>(uintptr_t{0xfffffffffffff000}); },
     FA3_ERR_INVALID_ARGUMENT,
     "q extends past the end of the address space (its sizes and strides overflow 64-bit addresses)"},
    {"too many query heads for a grid row",
     [](Args& a) {
       for (fa3_tensor* t : a.like_q()) {
         t->heads = 70000;
         t->seqlen = 1;
         t->stride_head = 128;
         t->stride_batch = 70000 * 128;
       }
       for (fa3_tensor* t : a.like_k()) t->heads = 1;
     },
     FA3_ERR_UNSUPPORTED,
     "q->heads (70000) must be at most 65535 for fa3_backward (its grids have a block row per head)"},
    {"batch too large for a grid layer",
     [](Args& a) {
       for (fa3_tensor* t : a.all()) {
         t->batch = 70000;
         t->stride_batch = int64_t{1} << 24;
       }
     },
     FA3_ERR_UNSUPPORTED,
     "q->batch (70000) must be at most 65535 for fa3_backward (its grids have a block layer per batch entry)"},
    {"causal 2", [](Args& a) { a.p.causal = 2; }, FA3_ERR_INVALID_ARGUMENT,
     "p->causal must be 0 or 1 (got 2)"},
    {"negative scale", [](Args& a) { a.p.softmax_scale = -1.0f; }, FA3_ERR_INVALID_ARGUMENT,
     "p->softmax_scale must be finite and > 0, or 0 for 1/sqrt(head_dim) (got -1.000000)"},
    {"nan scale", [](Args& a) { a.p.softmax_scale = std::nanf(""); }, FA3_ERR_INVALID_ARGUMENT,
     "p->softmax_scale must be finite and > 0, or 0 for 1/sqrt(head_dim) (got nan)"},
    {"inf scale", [](Args& a) { a.p.softmax_scale = INFINITY; }, FA3_ERR_INVALID_ARGUMENT,
     "p->softmax_scale must be finite and > 0, or 0 for 1/sqrt(head_dim) (got inf)"},
    {"deterministic 2", [](Args& a) { a.p.deterministic = 2; }, FA3_ERR_INVALID_ARGUMENT,
     "p->deterministic must be 0 or 1 (got 2)"},
    {"deterministic -1", [](Args& a) { a.p.deterministic = -1; }, FA3_ERR_INVALID_ARGUMENT,
     "p->deterministic must be 0 or 1 (got -1)"},
    {"v seqlen", [](Args& a) { a.v.seqlen = 299; }, FA3_ERR_INVALID_ARGUMENT,
     "v->seqlen (299) must equal k->seqlen (300)"},
    {"v heads", [](Args& a) { a.v.heads = 4; }, FA3_ERR_INVALID_ARGUMENT,
     "v->heads (4) must equal k->heads (2)"},
    {"o seqlen", [](Args& a) { a.o.seqlen = 99; }, FA3_ERR_INVALID_ARGUMENT,
     "o->seqlen (99) must equal q->seqlen (100)"},
    {"o head dim", [](Args& a) { a.o.head_dim = 64; }, FA3_ERR_INVALID_ARGUMENT,
     "o->head_dim (64) must equal q->head_dim (128)"},
    {"dout heads", [](Args& a) { a.dout.heads = 4; }, FA3_ERR_INVALID_ARGUMENT,
     "dout->heads (4) must equal o->heads (8)"},
    {"dq seqlen", [](Args& a) { a.dq.seqlen = 101; }, FA3_ERR_INVALID_ARGUMENT,
     "dq->seqlen (101) must equal q->seqlen (100)"},
    {"dk heads", [](Args& a) { a.dk.heads = 1; }, FA3_ERR_INVALID_ARGUMENT,
     "dk->heads (1) must equal k->heads (2)"},
    {"dv batch", [](Args& a) { a.dv.batch = 1; }, FA3_ERR_INVALID_ARGUMENT,
     "dv->batch (1) must equal v->batch (2)"},
    {"o misaligned", [](Args& a) { a.o.data = reinterpret_cast<char*>(kO) + 2; },
     FA3_ERR_INVALID_ARGUMENT,
     "o->data (0x400000002) must be 4-byte aligned (the kernels access element pairs)"},
    {"o odd stride", [](Args& a) { a.o.stride_seq = 8 * 128 + 1; }, FA3_ERR_INVALID_ARGUMENT,
     "o->stride_seq (1025) must be even (the kernels access element pairs)"},
    {"o negative stride", [](Args& a) { a.o.stride_head = -128; }, FA3_ERR_INVALID_ARGUMENT,
     "o->stride_head must be positive when o->heads > 1 (got -128)"},
    {"o address overflow",
     [](Args& a) { a.o.data = reinterpret_cast<void*>(uintptr_t{0xfffffffffffff000}); },
     FA3_ERR_INVALID_ARGUMENT,
     "o extends past the end of the address space (its sizes and strides overflow 64-bit addresses)"},
    {"lse null", [](Args& a) { a.lse = nullptr; }, FA3_ERR_INVALID_ARGUMENT,
     "lse is NULL: fa3_backward needs the (batch, heads, seqlen_q) fp32 LSE that fa3_forward wrote for o"},
    {"lse misaligned", [](Args& a) { a.lse = reinterpret_cast<float*>(kLse + 2); },
     FA3_ERR_INVALID_ARGUMENT, "lse (0x500000002) must be 4-byte aligned (fp32)"},
    {"dq misaligned", [](Args& a) { a.dq.data = reinterpret_cast<char*>(kDq) + 2; },
     FA3_ERR_INVALID_ARGUMENT,
     "dq->data (0x700000002) must be 4-byte aligned (the kernels access element pairs)"},
    {"dk odd stride", [](Args& a) { a.dk.stride_head = 129; }, FA3_ERR_INVALID_ARGUMENT,
     "dk->stride_head (129) must be even (the kernels access element pairs)"},
    {"dv negative stride", [](Args& a) { a.dv.stride_seq = -256; }, FA3_ERR_INVALID_ARGUMENT,
     "dv->stride_seq must be positive when dv->seqlen > 1 (got -256)"},
    {"dq address overflow",
     [](Args& a) { a.dq.data = reinterpret_cast<void*>(uintptr_t{0xfffffffffffff000}); },
     FA3_ERR_INVALID_ARGUMENT,
     "dq extends past the end of the address space (its sizes and strides overflow 64-bit addresses)"},
    {"dq rows overlap",
     [](Args& a) {
       a.dq.stride_seq = 64;
       a.dq.stride_head = 100 * 128;
       a.dq.stride_batch = 8 * 100 * 128;
     },
     FA3_ERR_INVALID_ARGUMENT,
     "dq->stride_seq (64) is smaller than the extent of dq's head_dim dimension(s) (128 elements): different elements of the output would share memory"},
    {"dk heads overlap", [](Args& a) { a.dk.stride_head = 64; }, FA3_ERR_INVALID_ARGUMENT,
     "dk->stride_head (64) is smaller than the extent of dk's head_dim dimension(s) (128 elements): different elements of the output would share memory"},
    {"dq aliases q", [](Args& a) { a.dq.data = a.q.data; }, FA3_ERR_INVALID_ARGUMENT, ""},
    {"dk inside v", [](Args& a) { a.dk.data = reinterpret_cast<char*>(kV) + 1024; },
     FA3_ERR_INVALID_ARGUMENT, ""},
    {"dq overlaps dout", [](Args& a) { a.dq.data = reinterpret_cast<char*>(kDout) + 4096; },
     FA3_ERR_INVALID_ARGUMENT, ""},
    {"dq overlaps o", [](Args& a) { a.dq.data = reinterpret_cast<char*>(kO) + 256; },
     FA3_ERR_INVALID_ARGUMENT, ""},
    {"dq overlaps lse", [](Args& a) { a.lse = reinterpret_cast<float*>(kDq + 256); },
     FA3_ERR_INVALID_ARGUMENT, ""},
    {"dv is dk", [](Args& a) { a.dv.data = a.dk.data; }, FA3_ERR_INVALID_ARGUMENT, ""},
    {"dk interleaves dq with other strides",
     [](Args& a) { a.dk.data = reinterpret_cast<char*>(kDq) + 512; }, FA3_ERR_INVALID_ARGUMENT,
     "dk and dq may share memory: their byte ranges interleave, and fa3 tells elements apart only for views with the same strides (such as views of one packed buffer); dq, dk and dv must not share memory with an input or with each other"},
    {"workspace misaligned", [](Args& a) { a.workspace = reinterpret_cast<char*>(kWorkspace) + 128; },
     FA3_ERR_INVALID_ARGUMENT, "workspace (0xa00000080) must be 256-byte aligned"},
    {"workspace too small", [](Args& a) { a.workspace_bytes = kArgsWorkspaceBytes - 1; },
     FA3_ERR_INVALID_ARGUMENT,
     "workspace_bytes (1331363) is less than the 1331364 bytes this problem needs (fa3_backward_workspace_size)"},
    {"workspace overlaps dv", [](Args& a) { a.workspace = reinterpret_cast<char*>(kDv) + 256; },
     FA3_ERR_INVALID_ARGUMENT,
     "workspace overlaps dv in memory: the workspace must not share memory with a tensor or lse"},
    {"workspace overlaps lse", [](Args& a) { a.workspace = reinterpret_cast<void*>(kLse - 256); },
     FA3_ERR_INVALID_ARGUMENT,
     "workspace overlaps lse in memory: the workspace must not share memory with a tensor or lse"},
    {"too many CTAs",
     [](Args& a) {
       // 65535 x 65535 (batch, K/V head) pairs of one key each: 2^32 - 2^17 + 1 CTAs.
       for (fa3_tensor* t : {&a.q, &a.k}) {
         t->batch = 65535;
         t->heads = 65535;
         t->seqlen = 1;
         t->stride_seq = t->stride_batch = 65535 * 128;
       }
     },
     FA3_ERR_UNSUPPORTED,
     "k->batch * k->heads * ceil(k->seqlen / 64) = 4294836225 exceeds the 2^31 - 1 CTAs of "
     "fa3_backward's main grid"},
    {"workspace past 2^63 bytes",
     [](Args& a) {
       // Inputs may repeat elements (16-byte strides): only the workspace is large.
       a.q.batch = a.k.batch = 65535;
       a.q.heads = 65535;
       a.q.seqlen = 2147483647 - 255;
       a.k.heads = a.k.seqlen = 1;
       for (fa3_tensor* t : {&a.q, &a.k}) {
         t->head_dim = 256;
         t->stride_head = t->stride_seq = t->stride_batch = 8;
       }
     },
     FA3_ERR_UNSUPPORTED,
     "q's batch * heads * seqlen * head_dim would need about 8865077964278 GiB of fp32 "
     "workspace, past the 2^63 bytes fa3_backward can address"},
};

// The sentences of the aliasing rules (built from kAlias, which a constant table cannot).
std::string expected_message(const Rule& rule) {
  const std::string what = rule.what;
  if (what == "dq aliases q") return alias("dq", "q");
  if (what == "dk inside v") return alias("dk", "v");
  if (what == "dq overlaps dout") return alias("dq", "dout");
  if (what == "dq overlaps o") return alias("dq", "o");
  if (what == "dq overlaps lse") return alias("dq", "lse");
  if (what == "dv is dk") return alias("dv", "dk");
  return rule.message;
}

// ---- the fake driver (test/fake_cuda; its controls: support/fake_cuda_client.h) -------------

// A handle on the fake driver for one test; the driver's log starts empty after its creation.
// `a` with 4000 query rows: a problem whose workspace is larger than the default one's.
Args with_4000_query_rows(Args a) {
  for (fa3_tensor* t : a.like_q()) {
    t->seqlen = 4000;
    t->stride_batch = 4000 * 8 * 128;
  }
  return a;
}

// A made-up stream handle (the fake driver tells streams apart by their value).
void* stream_at(uintptr_t n) { return reinterpret_cast<void*>(n); }

// The parameter block of the last launch (a backward call's last kernel, its postprocess, takes
// the same block as the other two).
fa3::BwdParams last_params() {
  unsigned grid = 0, block = 0, smem = 0;
  fa3::BwdParams p{};
  REQUIRE(fake().last_launch(&grid, &block, &smem, &p, sizeof p) == 1);
  return p;
}

size_t workspace_of(const Args& a) {
  fa3::BackwardProblem prob;
  Args copy = a;
  REQUIRE_FALSE(copy.check(&prob).failed());
  return fa3::backward_workspace(prob).total;
}

// The handle rounds the workspaces it allocates up to whole granules.
size_t granules(size_t bytes) {
  return (bytes + fa3::kWorkspaceGranularity - 1) / fa3::kWorkspaceGranularity *
         fa3::kWorkspaceGranularity;
}

uintptr_t address_of(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

TEST_CASE("backward: valid arguments describe the problem", "[cpu][api]") {
  Args a;
  fa3::BackwardProblem prob;
  const fa3::Error e = a.check(&prob);
  INFO(e.message);
  REQUIRE_FALSE(e.failed());
  CHECK(prob.dtype == fa3::DType::BF16);
  CHECK(prob.head_dim == 128);
  CHECK(prob.causal);
  CHECK_FALSE(prob.deterministic);
  CHECK(prob.batch == 2);
  CHECK(prob.seqlen_q == 100);
  CHECK(prob.seqlen_k == 300);
  CHECK(prob.heads == 8);
  CHECK(prob.heads_kv == 2);
  CHECK(prob.softmax_scale == Approx(1.0 / std::sqrt(128.0)));

  a.params = nullptr;  // defaults: not causal, not deterministic, 1/sqrt(d)
  a.workspace = nullptr;  // (a non-causal call's workspace is larger: the split last wave's)
  REQUIRE_FALSE(a.check(&prob).failed());
  CHECK_FALSE(prob.causal);
  CHECK_FALSE(prob.deterministic);
  a.p = {0.25f, 0, 1};
  a.params = &a.p;
  REQUIRE_FALSE(a.check(&prob).failed());
  CHECK(prob.softmax_scale == 0.25f);
  CHECK(prob.deterministic);
  a.q.dtype = a.k.dtype = a.v.dtype = a.o.dtype = a.dout.dtype = a.dq.dtype = a.dk.dtype =
      a.dv.dtype = FA3_F16;
  for (fa3_tensor* t : a.all()) {
    t->head_dim = 64;
    t->stride_head = 64;
    t->stride_seq = t->heads * 64;
    t->stride_batch = t->seqlen * t->heads * 64;
  }
  a.workspace = nullptr;  // the handle's own
  REQUIRE_FALSE(a.check(&prob).failed());
  CHECK(prob.dtype == fa3::DType::F16);
  CHECK(prob.head_dim == 64);
}

TEST_CASE("backward: strided views, packed buffers and loose alignment are accepted",
          "[cpu][api]") {
  const int64_t B = 2, S = 64, H = 4, Hkv = 2, D = 64;
  SECTION("q, k, v and dq, dk, dv as views of two packed (B, S, 3, H, D) buffers") {
    Args a;
    const uintptr_t bases[2] = {kQ, kDq};
    fa3_tensor* views[2][3] = {{&a.q, &a.k, &a.v}, {&a.dq, &a.dk, &a.dv}};
    for (int packed = 0; packed < 2; ++packed)
      for (int i = 0; i < 3; ++i) {
        fa3_tensor* t = views[packed][i];
        *t = tensor(bases[packed] + static_cast<uintptr_t>(i * H * D * 2), B, S, H, D);
        t->stride_seq = 3 * H * D;
        t->stride_batch = S * 3 * H * D;
      }
    a.o = tensor(kO, B, S, H, D);
    a.dout = tensor(kDout, B, S, H, D);
    const fa3::Error e = a.check();
    INFO(e.message);
    CHECK_FALSE(e.failed());
  }
  SECTION("GQA: dq, dk, dv as views of one (B, S, H + 2 Hkv, D) buffer") {
    Args a;
    const int64_t row = (H + 2 * Hkv) * D;
    a.q = tensor(kQ, B, S, H, D);
    a.k = tensor(kK, B, S, Hkv, D);
    a.v = tensor(kV, B, S, Hkv, D);
    a.o = tensor(kO, B, S, H, D);
    a.dout = tensor(kDout, B, S, H, D);
    a.dq = tensor(kDq, B, S, H, D);
    a.dk = tensor(kDq + static_cast<uintptr_t>(H * D * 2), B, S, Hkv, D);
    a.dv = tensor(kDq + static_cast<uintptr_t>((H + Hkv) * D * 2), B, S, Hkv, D);
    for (fa3_tensor* t : {&a.dq, &a.dk, &a.dv}) {
      t->stride_seq = row;
      t->stride_batch = S * row;
    }
    const fa3::Error e = a.check();
    INFO(e.message);
    CHECK_FALSE(e.failed());
  }
  SECTION("(B, H, S, D) outputs viewed as (B, S, H, D); o, dq, dk, dv only 4-byte aligned") {
    Args a;
    for (fa3_tensor* t : {&a.o, &a.dq, &a.dk, &a.dv}) {
      t->stride_head = t->seqlen * 128;
      t->stride_seq = 128;
      t->data = static_cast<char*>(t->data) + 4;
    }
    a.dq.stride_seq = 130;  // padded rows: even strides suffice
    a.dq.stride_head = 100 * 130;
    a.dq.stride_batch = 8 * 100 * 130;
    const fa3::Error e = a.check();
    INFO(e.message);
    CHECK_FALSE(e.failed());
  }
  SECTION("batch 1 with stride_batch 0; an lse in the padding between dq's rows") {
    Args a;
    for (fa3_tensor* t : a.all()) {
      t->batch = 1;
      t->stride_batch = 0;
    }
    for (fa3_tensor* t : a.like_q()) t->seqlen = 2;  // lse: 16 floats
    a.dq.stride_seq = 8 * 128 + 64;                  // 128 bytes of padding after each row
    a.lse = reinterpret_cast<float*>(kDq + 8 * 128 * 2);
    const fa3::Error e = a.check();
    INFO(e.message);
    CHECK_FALSE(e.failed());
    a.lse = reinterpret_cast<float*>(kDq + 8 * 128 * 2 - 4);  // one float into the last row
    CHECK(a.check().message == alias("dq", "lse"));
  }
  SECTION("padded heads: a row of dq ends with its last head's columns") {
    // stride_head 256 for 128 columns: a row spans 7 * 256 + 128 = 1920 elements.
    Args a;
    a.dq.stride_head = 256;
    a.dq.stride_seq = 1920;
    a.dq.stride_batch = 1920 * 100;
    const fa3::Error e = a.check();
    INFO(e.message);
    CHECK_FALSE(e.failed());
    a.dq.stride_seq = 1918;
    CHECK(a.check().message ==
          "dq->stride_seq (1918) is smaller than the extent of dq's heads dimension(s) (1920 "
          "elements): different elements of the output would share memory");
  }
}

TEST_CASE("backward: every broken argument rule has its status and sentence", "[cpu][api]") {
  for (const Rule& rule : kRules) {
    Args a;
    rule.breaks(a);
    const fa3::Error e = a.check();
    INFO(rule.what << ": " << e.message);
    CHECK(e.status == rule.status);
    CHECK(e.message == expected_message(rule));
  }
}

TEST_CASE("backward: fa3_backward reports each broken rule and makes no driver call",
          "[cpu][api][runtime]") {
  FakeHandle fh;
  for (const Rule& rule : kRules) {
    Args a;
    rule.breaks(a);
    INFO(rule.what);
    CHECK(a.run(fh.h) == rule.status);
    CHECK(std::string(fa3_last_error()) == expected_message(rule));
    // Not even a context push: nothing is launched, allocated or touched.
    CHECK(fake().calls().empty());
  }
}

TEST_CASE("backward: two tensors share an element exactly when their strides say so",
          "[cpu][api]") {
  using fa3::tensor_rules::Sharing;
  using fa3::tensor_rules::element_sharing;
  const int64_t B = 2, S = 50, H = 4, D = 64;
  auto packed = [&](int which) {
    fa3_tensor t = tensor(kDq + static_cast<uintptr_t>(which * H * D * 2), B, S, H, D);
    t.stride_seq = 3 * H * D;
    t.stride_batch = S * 3 * H * D;
    return t;
  };
  const fa3_tensor q = packed(0), k = packed(1), v = packed(2);
  CHECK(element_sharing(q, k) == Sharing::None);
  CHECK(element_sharing(k, q) == Sharing::None);
  CHECK(element_sharing(q, v) == Sharing::None);
  CHECK(element_sharing(v, k) == Sharing::None);
  CHECK(element_sharing(q, q) == Sharing::Some);
  // k one element earlier: its first column is q's last one, in every row.
  fa3_tensor shifted = k;
  shifted.data = static_cast<char*>(k.data) - 2;
  CHECK(element_sharing(q, shifted) == Sharing::Some);
  CHECK(element_sharing(shifted, q) == Sharing::Some);
  // q moved on by one row of the packed buffer: its rows 1.. are rows of the moved one.
  shifted.data = static_cast<char*>(q.data) + 3 * H * D * 2;
  CHECK(element_sharing(q, shifted) == Sharing::Some);
  // Apart in memory: no arithmetic needed.
  CHECK(element_sharing(q, tensor(kQ, B, S, H, D)) == Sharing::None);
  // A contiguous (B, S, H, D) tensor over the packed buffer: different strides.
  CHECK(element_sharing(q, tensor(kDq, B, S, H, D)) == Sharing::Unknown);
  // A run of bytes (one row of elements) in the gap between rows, and across one.
  fa3_tensor gap{};
  gap.dtype = FA3_F16;
  gap.batch = gap.seqlen = gap.heads = 1;
  gap.head_dim = 2 * H * D;
  gap.data = static_cast<char*>(q.data) + H * D * 2;
  CHECK(element_sharing(q, gap) == Sharing::None);
  CHECK(element_sharing(gap, q) == Sharing::None);
  gap.head_dim += 1;
  CHECK(element_sharing(q, gap) == Sharing::Some);
  // Strides that do not nest (windows of 16 elements over 64-element rows): too many ways to
  // meet for the bounded search.
  fa3_tensor window = tensor(kK, 1, 1000, 1, D);
  window.stride_seq = 16;
  fa3_tensor other = window;
  other.data = reinterpret_cast<char*>(kK) + 3000 * 2 + 2;
  CHECK(element_sharing(window, other) == Sharing::Unknown);
  fa3_tensor run = gap;  // a run of 8 elements inside the windows' range
  run.head_dim = 8;
  run.data = reinterpret_cast<char*>(kK) + 100 * 2;
  CHECK(element_sharing(window, run) != Sharing::None);
  // A run against nested dimensions is exact also where the other's strides differ: between
  // the heads of a padded (B, H, S, D) layout and across one.
  fa3_tensor heads_major = tensor(kV, 1, 10, 2, D);
  heads_major.stride_head = 10 * D + 32;  // 64 bytes of padding after each head
  heads_major.stride_seq = D;
  run.data = reinterpret_cast<char*>(kV) + 10 * D * 2;
  run.head_dim = 32;
  CHECK(element_sharing(heads_major, run) == Sharing::None);
  CHECK(element_sharing(run, heads_major) == Sharing::None);
  run.head_dim = 33;
  CHECK(element_sharing(run, heads_major) == Sharing::Some);
  run.data = reinterpret_cast<char*>(kV) + 10 * D * 2 - 2;
  run.head_dim = 1;
  CHECK(element_sharing(heads_major, run) == Sharing::Some);
}

TEST_CASE("backward: the workspace layout", "[cpu][api]") {
  fa3::BackwardProblem prob;
  prob.batch = 2; prob.heads = 8; prob.heads_kv = 2; prob.seqlen_q = 100; prob.seqlen_k = 300;
  prob.head_dim = 128;
  prob.causal = true;  // no split last wave's regions (below)
  fa3::BackwardWorkspace w = fa3::backward_workspace(prob);
  CHECK(w.lse_log2 == 0u);
  CHECK(fa3::backward_rows(100) == 160);           // 80-row blocks need more than 128-row ones
  CHECK(w.dpsum == 10240u);                       // 2 x 8 x 160 rows of fp32
  CHECK(w.dq_accum == 20480u);
  CHECK(w.dq_semaphore == 20480u + 2560u * 128 * 4);
  CHECK(w.tile_counter == w.dq_semaphore + 2560 / 64 * 4);  // one int32 per 64 rows
  CHECK(w.total == w.tile_counter + 4);
  CHECK(w.total == kArgsWorkspaceBytes);
  // Every kernel's last query block lies inside the rows: whole blocks of 64, 80 and 128.
  for (int64_t s : {1, 63, 64, 65, 79, 80, 81, 127, 128, 129, 160, 255, 256, 640, 1000, 8192})
    for (int64_t block_m : {64, 80, 128}) {
      INFO("seqlen_q " << s << ", block_m " << block_m);
      CHECK((s + block_m - 1) / block_m * block_m <= fa3::backward_rows(s));
      CHECK(fa3::backward_rows(s) % 16 == 0);  // 16-byte aligned rows of LSE, D
      CHECK(fa3::backward_rows(s) < s + 128);
    }

  // One row: everything rounds up to a 128-row block (two 64-row semaphores); d64.
  prob.batch = 1; prob.heads = 1; prob.heads_kv = 1; prob.seqlen_q = 1; prob.head_dim = 64;
  w = fa3::backward_workspace(prob);
  CHECK(w.dpsum == 512u);
  CHECK(w.dq_accum == 1024u);
  CHECK(w.dq_semaphore == 1024u + 128 * 64 * 4);
  CHECK(w.tile_counter == w.dq_semaphore + 2 * 4);
  CHECK(w.total == w.tile_counter + 4);

  // Past 2^32 bytes (a problem over 2^31 elements): size_t arithmetic throughout (8192 rows
  // take 103 blocks of 80: 8240).
  prob.batch = 2; prob.heads = 1032; prob.heads_kv = 8; prob.seqlen_q = 8192; prob.head_dim = 128;
  w = fa3::backward_workspace(prob);
  const size_t rows = size_t{2} * 1032 * 8240;
  CHECK(w.dpsum == rows * 4);
  CHECK(w.dq_accum == rows * 8);
  CHECK(w.dq_semaphore == rows * 8 + rows * 128 * 4);
  CHECK(w.total == w.dq_semaphore + rows / 64 * 4 + 4);
  for (size_t offset : {w.lse_log2, w.dpsum, w.dq_accum, w.dq_semaphore})
    CHECK(offset % fa3::kWorkspaceAlignment == 0);

  // Non-causal calls at head dim 128 (whose _dqt_rw_fs_pt splits) without the deterministic
  // mode: the split last wave's partial dK_j, dV_j slots (3 a K/V tile of 128 keys, at most
  // 2 x 144) and counters (a tile, at most 144) after the tile counter.
  prob.batch = 2; prob.heads = 8; prob.heads_kv = 2; prob.seqlen_q = 100; prob.seqlen_k = 300;
  prob.head_dim = 128;
  const size_t legacy_total = fa3::backward_workspace(prob).total;
  prob.causal = false;
  w = fa3::backward_workspace(prob);
  CHECK(w.split_slots == 36u);  // 2 x 2 x 3 tiles
  CHECK(w.split_tiles == 12u);
  CHECK(w.dkv_partial == (w.tile_counter + 4 + 255) / 256 * 256);
  CHECK(w.split_counters == w.dkv_partial + 36u * 2 * 128 * 128 * 4);
  CHECK(w.total == w.split_counters + 12 * 4);
  CHECK(w.tile_counter + 4 == legacy_total);
  prob.seqlen_k = 100000;  // 2 x 2 x 782 tiles: the caps
  w = fa3::backward_workspace(prob);
  CHECK(w.split_slots == 288u);
  CHECK(w.split_tiles == 144u);
  CHECK(w.total == w.split_counters + 144 * 4);
  prob.deterministic = true;  // ordered adds: no split
  CHECK(fa3::backward_workspace(prob).split_slots == 0u);
  CHECK(fa3::backward_workspace(prob).total == fa3::backward_workspace(prob).tile_counter + 4);
  prob.deterministic = false;
  // The regions follow the compiled kernels: a key has them where one of its kernels splits
  // (head dim 128's _dqt_rw_fs_pt in the production set; the lab's d64 _dqq_rw_pt too).
  for (const fa3::DType dtype : {fa3::DType::F16, fa3::DType::BF16})
    for (const int64_t head_dim : {64, 128, 256}) {
      INFO(fa3::dtype_name(dtype) << " head_dim " << head_dim);
      prob.dtype = dtype;
      prob.head_dim = head_dim;
      bool splits = false;
      for (const fa3::KernelInfo& k : fa3::compiled_backward_kernels())
        splits = splits || (k.bwd.dtype == dtype && k.bwd.head_dim == head_dim &&
                            !k.bwd.causal && k.bwd.persistent && k.bwd.block_n == 128);
      CHECK(fa3::backward_key_splits(dtype, head_dim) == splits);
      // Which keys split, by name: d128's picks from 1024 query rows; d64 only with the lab's
      // _dqq_rw_pt compiled in (the production pick takes a CTA a tile); d256 never (80-key
      // tiles).
      const std::string dt = fa3::dtype_name(dtype);
      if (head_dim == 128) {
        CHECK(fa3::find_any_compiled_kernel("fa3_bwd_" + dt + "_d128_m80_n128_s2_w2_dqt_rw_fs_pt"));
        CHECK(splits);
      }
      if (head_dim == 64)
        CHECK(splits == (fa3::find_any_compiled_kernel(
                             "fa3_bwd_" + dt + "_d64_m128_n128_s2_w2_dqq_rw_pt") != nullptr));
      if (head_dim == 256) CHECK_FALSE(splits);
      w = fa3::backward_workspace(prob);
      CHECK((w.split_slots > 0u) == splits);
      if (!splits) CHECK(w.total == w.tile_counter + 4);
    }
}

TEST_CASE("backward: the dQ accumulator's block layout (DqAccumLayout)", "[cpu][api]") {
  // Every element of a block has its own float, the warpgroups' 64-row parts are contiguous
  // runs at part_offset, and within a band the order is tile::AccFragmentOrder's.
  for (int head_dim : {64, 128, 256})
    for (int block_m : {64, 128}) {
      const fa3::DqAccumLayout layout{head_dim};
      std::vector<int> seen(static_cast<size_t>(block_m) * head_dim, 0);
      for (int row = 0; row < block_m; ++row)
        for (int col = 0; col < head_dim; ++col) {
          const int64_t f = layout.float_index(row, col);
          REQUIRE(f >= 0);
          REQUIRE(f < static_cast<int64_t>(seen.size()));
          ++seen[static_cast<size_t>(f)];
          const int64_t band = layout.part_offset(row / 64 * 64, 0);
          const int within = static_cast<int>(f - band);
          REQUIRE(within < 64 * head_dim);
          CHECK(fa3::tile::AccFragmentOrder::row_of(within) == row % 64);
          CHECK(fa3::tile::AccFragmentOrder::col_of(within) == col);
          // A 64-column part starting at col0 holds its columns' floats from part_offset on.
          const int col0 = col / 64 * 64;
          const int64_t part = layout.part_offset(row / 64 * 64, col0);
          CHECK(f - part >= 0);
          CHECK(f - part < 64 * 64);
        }
      for (int n : seen) REQUIRE(n == 1);
    }
  // Thread t's value e of a warpgroup part goes where AccStagingTile stages it.
  const fa3::DqAccumLayout layout{128};
  for (int t = 0; t < 128; ++t)
    for (int e = 0; e < 32; ++e) {
      const int i = fa3::tile::AccFragmentOrder::index(t, e);
      const int row = fa3::tile::AccFragmentOrder::row_of(i), col = fa3::tile::AccFragmentOrder::col_of(i);
      CHECK(layout.float_index(row, 64 + col) == layout.part_offset(0, 64) + i);
      CHECK(layout.float_index(64 + row, col) == layout.part_offset(64, 0) + i);
    }
  // _dqt (dQ^T computed): every element of a block has its own float, and warpgroup w's
  // value e of thread t (its dQ^T row = head-dim column 64 w + row_of, its column = the
  // block's row col_of) is float 64 block_m w + AccFragmentOrder::index(t, e), where the dQ
  // writer adds the staged piece.
  for (int block_m : {64, 80}) {
    std::vector<int> seen(static_cast<size_t>(block_m) * 128, 0);
    for (int row = 0; row < block_m; ++row)
      for (int col = 0; col < 128; ++col) {
        const int64_t f = fa3::DqAccumLayout::transposed_float_index(row, col, block_m);
        REQUIRE(f >= 0);
        REQUIRE(f < static_cast<int64_t>(seen.size()));
        ++seen[static_cast<size_t>(f)];
      }
    for (int n : seen) REQUIRE(n == 1);
    for (int w = 0; w < 2; ++w)
      for (int t = 0; t < 128; ++t)
        for (int e = 0; e < block_m / 2; ++e) {
          const int i = fa3::tile::AccFragmentOrder::index(t, e);
          const int hd = 64 * w + fa3::tile::AccFragmentOrder::row_of(i);
          const int query = fa3::tile::AccFragmentOrder::col_of(i);
          CHECK(fa3::DqAccumLayout::transposed_float_index(query, hd, block_m) ==
                int64_t{64} * block_m * w + i);
        }
  }
}

TEST_CASE("backward: the first compiled kernel that fits runs; none is a sentence",
          "[cpu][api]") {
  fa3::BackwardProblem prob;
  prob.dtype = fa3::DType::F16;
  prob.head_dim = 64;
  prob.causal = true;
  const fa3::KernelInfo* kernel = nullptr;
  const std::vector<fa3::KernelInfo> none;
  fa3::Error e = fa3::select_backward_kernel(none, prob, &kernel);
  CHECK(e.status == FA3_ERR_UNSUPPORTED);
  CHECK(e.message ==
        "no backward kernel for this problem (f16, head_dim 64, causal) is compiled into this library");
  // Forward kernels never serve a backward call, even with a matching config.
  std::vector<fa3::KernelInfo> forward_only(1);
  forward_only[0].name = "fa3_fwd_f16_d64_m128_n128_s2_w2_causal";
  forward_only[0].bwd.dtype = fa3::DType::F16;
  forward_only[0].bwd.head_dim = 64;
  forward_only[0].bwd.causal = true;
  CHECK(fa3::select_backward_kernel(forward_only, prob, &kernel).status == FA3_ERR_UNSUPPORTED);
  prob.causal = false;
  prob.dtype = fa3::DType::BF16;
  prob.head_dim = 128;
  e = fa3::select_backward_kernel(none, prob, &kernel);
  CHECK(e.message ==
        "no backward kernel for this problem (bf16, head_dim 128, not causal) is compiled into this library");

  // Every problem the checks accept has a kernel in this library.
  for (const fa3::DType dtype : {fa3::DType::F16, fa3::DType::BF16})
    for (const int head_dim : {64, 128, 256})
      for (const bool causal : {false, true}) {
        prob.dtype = dtype;
        prob.head_dim = head_dim;
        prob.causal = causal;
        kernel = nullptr;
        e = fa3::select_backward_kernel(fa3::compiled_backward_kernels(), prob, &kernel);
        INFO(fa3::dtype_name(dtype) << " d" << head_dim << (causal ? " causal" : "") << ": "
                                    << e.message);
        REQUIRE_FALSE(e.failed());
        CHECK(kernel->direction == fa3::Direction::Backward);
        CHECK(fa3::bwd_config_fits(kernel->bwd, prob));
        CHECK(kernel->name.rfind(std::string("fa3_bwd_") + fa3::dtype_name(dtype) + "_d" +
                                     std::to_string(head_dim) + "_",
                                 0) == 0);
      }
}

TEST_CASE("backward: fa3_backward_workspace_size follows the layout and checks q, k and p",
          "[cpu][api][runtime]") {
  size_t bytes = 0;
  Args a;
  CHECK(fa3_backward_workspace_size(nullptr, &a.q, &a.k, &a.p, &bytes) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "h is NULL: create a handle with fa3_create");
  FakeHandle fh;
  CHECK(fa3_backward_workspace_size(fh.h, &a.q, &a.k, &a.p, nullptr) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "bytes is NULL: pass the address of a size_t");

  REQUIRE(fa3_backward_workspace_size(fh.h, &a.q, &a.k, &a.p, &bytes) == FA3_OK);
  CHECK(bytes == kArgsWorkspaceBytes);
  CHECK(std::string(fa3_last_error()).empty());
  // Causal or deterministic calls: independent of seqlen_k.
  a.k.seqlen = 5;
  REQUIRE(fa3_backward_workspace_size(fh.h, &a.q, &a.k, &a.p, &bytes) == FA3_OK);
  CHECK(bytes == kArgsWorkspaceBytes);
  a.p.causal = 0;
  a.p.deterministic = 1;
  REQUIRE(fa3_backward_workspace_size(fh.h, &a.q, &a.k, &a.p, &bytes) == FA3_OK);
  CHECK(bytes == kArgsWorkspaceBytes);
  // Non-causal ones (NULL p is the defaults) add the split last wave's regions, 3 slots and a
  // counter a K/V tile (here 2 x 2 tiles of 5 keys).
  auto with_split = [](size_t base, size_t tiles, size_t head_dim) {
    const size_t partial = (base + 255) / 256 * 256;
    const size_t counters = (partial + 3 * tiles * 2 * 128 * head_dim * 4 + 255) / 256 * 256;
    return counters + tiles * 4;
  };
  REQUIRE(fa3_backward_workspace_size(fh.h, &a.q, &a.k, nullptr, &bytes) == FA3_OK);
  CHECK(bytes == with_split(kArgsWorkspaceBytes, 4, 128));
  a.q.seqlen = 129;  // two 128-row blocks, four 64-row semaphores
  a.q.head_dim = a.k.head_dim = 64;
  a.q.stride_head = a.k.stride_head = 64;
  REQUIRE(fa3_backward_workspace_size(fh.h, &a.q, &a.k, nullptr, &bytes) == FA3_OK);
  const size_t rows = 2 * 8 * 256;
  // + the tile counter; the split regions where a compiled d64 kernel splits (none in the
  // production set; the lab's _dqq_rw_pt).
  const size_t d64_bytes = rows * 4 * 2 + rows * 64 * 4 + 2 * 8 * 4 * 4 + 4;
  CHECK(bytes == (fa3::backward_key_splits(fa3::DType::BF16, 64) ? with_split(d64_bytes, 4, 64)
                                                                  : d64_bytes));

  // The checks on q, k and p are fa3_backward's, with its sentences.
  Args b;
  b.p.deterministic = 3;
  CHECK(fa3_backward_workspace_size(fh.h, &b.q, &b.k, &b.p, &bytes) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "p->deterministic must be 0 or 1 (got 3)");
  b.p.deterministic = 0;
  for (fa3_tensor* t : {&b.q, &b.k}) t->head_dim = 96;
  CHECK(fa3_backward_workspace_size(fh.h, &b.q, &b.k, &b.p, &bytes) == FA3_ERR_UNSUPPORTED);
  CHECK(std::string(fa3_last_error()) ==
        "q->head_dim must be 64, 128 or 256 for fa3_backward (got 96)");
  CHECK(fa3_backward_workspace_size(fh.h, nullptr, &b.k, &b.p, &bytes) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "q is NULL: pass a tensor descriptor");
  // What fa3_backward would refuse for q and k alone, the size refuses too (no size that
  // wrapped around, no grid the launch would refuse).
  for (const Rule& rule : kRules) {
    const std::string what = rule.what;
    if (what != "too many CTAs" && what != "workspace past 2^63 bytes") continue;
    INFO(what);
    Args c;
    rule.breaks(c);
    bytes = 7;
    CHECK(fa3_backward_workspace_size(fh.h, &c.q, &c.k, &c.p, &bytes) == rule.status);
    CHECK(std::string(fa3_last_error()) == rule.message);
    CHECK(bytes == 7);
  }
  CHECK(fake().calls().empty());
}

TEST_CASE("backward: NULL handle", "[cpu][api]") {
  Args a;
  CHECK(a.run(nullptr) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "h is NULL: create a handle with fa3_create");
}

// ---- launches against the fake driver (the runtime's backward_launch) --------------------------

TEST_CASE("backward: the caller's workspace reaches the kernels; nothing is allocated",
          "[cpu][api][runtime]") {
  FakeHandle fh;
  Args a;
  a.p.deterministic = 1;
  REQUIRE(a.run(fh.h, reinterpret_cast<void*>(0x10)) == FA3_OK);
  CHECK(fake().count("cuLaunchKernelEx") == 3);  // preprocess, main kernel, postprocess
  CHECK(fake().count("cuMemAlloc") == 0);
  CHECK(fake().count("cuStreamSynchronize") == 0);
  const fa3::BwdParams p = last_params();
  fa3::BackwardProblem prob;
  REQUIRE_FALSE(a.check(&prob).failed());
  const fa3::BackwardWorkspace w = fa3::backward_workspace(prob);
  CHECK(address_of(p.lse_log2) == kWorkspace + w.lse_log2);
  CHECK(address_of(p.dpsum) == kWorkspace + w.dpsum);
  CHECK(address_of(p.dq_accum) == kWorkspace + w.dq_accum);
  CHECK(address_of(p.dq_semaphore) == kWorkspace + w.dq_semaphore);
  CHECK(address_of(p.tile_counter) == kWorkspace + w.tile_counter);
  CHECK(p.lse == a.lse);
  CHECK(address_of(p.dq) == kDq);
  CHECK(address_of(p.dk) == kDk);
  CHECK(address_of(p.dv) == kDv);
  CHECK(p.ordered_adds == fa3::kOrderedKvBlocks);  // head dim 128
  CHECK(p.seqlen_q == 100);
  CHECK(p.seqlen_k == 300);
  CHECK(p.heads_per_kv_head == 4);
  // A workspace of exactly the size, not larger, is enough.
  a.workspace_bytes = workspace_of(a);
  CHECK(a.run(fh.h) == FA3_OK);
}

TEST_CASE("backward: the three kernels are ordinary launches, on every driver "
          "(kBackwardProgrammaticLaunch)",
          "[cpu][api][runtime]") {
  // Programmatic dependent launch hung concurrent calls on many streams (v82).
  static_assert(!fa3::kBackwardProgrammaticLaunch);
  Args a;
  for (const int version : {13000, 12030, 12020}) {
    INFO("driver " << version);
    fake().set_driver_version(version);
    FakeHandle fh;
    fake().set_driver_version(13000);  // read when the handle was created
    REQUIRE(a.run(fh.h) == FA3_OK);
    CHECK(fake().launch_kinds() == "---");  // preprocess, main kernel, postprocess
  }
}

TEST_CASE("backward: a persistent (_pt) kernel gets a CTA per SM, the others a CTA per tile",
          "[cpu][api][runtime]") {
  FakeHandle fh;  // the fake device has 132 SMs
  Args a;         // d128: 2 batches x 2 K/V heads x 3 blocks of 128 keys; 2 64-row blocks
  REQUIRE(a.run(fh.h) == FA3_OK);
  CHECK(fake().launch_grids() == "2 12 2 ");
  auto d64 = [](Args& b, int64_t seqlen, int causal) {
    for (fa3_tensor* t : {&b.q, &b.k, &b.v, &b.o, &b.dout, &b.dq, &b.dk, &b.dv}) {
      t->head_dim = 64;
      t->seqlen = seqlen;
      t->stride_head = 64;
      t->stride_seq = 64 * t->heads;
      t->stride_batch = seqlen * 64 * t->heads;
    }
    b.p.causal = causal;
    b.workspace = nullptr;
  };
  for (int causal : {0, 1}) {
    INFO("causal " << causal);
    // 4096 keys: 32 blocks x 4 pairs = 128 tiles, a CTA each; 8192: 256 tiles, on the 132
    // SMs for the causal pick (_pt), a CTA each for the non-causal one.
    Args small;
    d64(small, 4096, causal);
    // (The built-in table's picks; their names are this test's premise.)
    const std::string kernel = std::string("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq") +
                               (causal ? "_pt_causal" : "_rw_fs");
    REQUIRE(fa3::find_any_compiled_kernel(kernel) != nullptr);
    fake().reset();
    REQUIRE(small.run(fh.h) == FA3_OK);
    CHECK(fake().launch_grids() == "32 128 32 ");
    Args large;
    d64(large, 8192, causal);
    fake().reset();
    REQUIRE(large.run(fh.h) == FA3_OK);
    CHECK(fake().launch_grids() == (causal ? "64 132 64 " : "64 256 64 "));
    // The deterministic mode: the causal pick's _lf entry (BwdConfig::causal_last_first),
    // with the last K/V block's adds first; non-causal calls the main entry.
    large.p.deterministic = 1;
    fake().reset();
    REQUIRE(large.run(fh.h) == FA3_OK);
    CHECK(fake().launch_names() ==
          kernel + "_pre " + kernel + (causal ? "_lf " : " ") + kernel + "_post ");
    CHECK(last_params().ordered_adds ==
          (causal ? fa3::kOrderedLastFirst : fa3::kOrderedKvBlocks));
    // The default mode's small causal calls order their adds too (backward_ordered_adds):
    // from 6 query blocks the last K/V block's first, in the _lf entry; below that, K/V
    // block order in the main entry. Non-causal calls add unordered.
    for (const auto& [seqlen, last_first] : {std::pair<int64_t, bool>{1000, true}, {640, false}}) {
      INFO("seqlen " << seqlen);
      Args short_call;
      d64(short_call, seqlen, causal);
      fake().reset();
      REQUIRE(short_call.run(fh.h) == FA3_OK);
      CHECK(fake().launch_names() == kernel + "_pre " + kernel +
                                         (causal && last_first ? "_lf " : " ") + kernel + "_post ");
      CHECK(last_params().ordered_adds == (!causal      ? 0
                                           : last_first ? fa3::kOrderedLastFirst
                                                        : fa3::kOrderedKvBlocks));
    }
  }
  // The d128 causal pick has no _lf entry: its deterministic calls run the main one.
  a.p.deterministic = 1;
  fake().reset();
  REQUIRE(a.run(fh.h) == FA3_OK);
  CHECK(fake().launch_names().find("_lf") == std::string::npos);
  // A persistent grid takes every SM: all 114, all 60 of a MIG slice.
  for (const auto& [sms, grids] : {std::pair{114, "64 114 64 "}, std::pair{60, "64 60 64 "}}) {
    INFO(sms << " SMs");
    fake().set_sm_count(sms);
    FakeHandle gpu;
    fake().set_sm_count(132);  // read when the handle was created
    Args b;
    d64(b, 8192, 1);
    REQUIRE(b.run(gpu.h) == FA3_OK);
    CHECK(fake().launch_grids() == grids);
  }
}

// The pieces of the split tiles of a plan, each tile's steps in order, as the kernels decode
// them (bwd_piece_at, bwd_split_parts), checked against the plan's promises.
static void check_split_plan(const fa3::BackwardSplitPlan& plan, int64_t tiles, int64_t tile_steps,
                             int64_t ctas, const fa3::BackwardWorkspace& ws) {
  INFO("tiles " << tiles << ", tile steps " << tile_steps << ", CTAs " << ctas);
  const int64_t last = tiles - plan.first, chunks = plan.draws - plan.first;
  REQUIRE(last > 0);
  CHECK(plan.first % ctas == 0);                        // whole waves go whole
  CHECK(last < ctas);                                    // the partial wave is split
  CHECK(chunks <= ctas);                                 // a chunk a CTA at most
  CHECK(2 * plan.chunk >= tile_steps);                   // at least half a tile
  CHECK(4 * plan.chunk <= 3 * tile_steps);               // at most 3/4 of one
  CHECK(chunks == (last * tile_steps + plan.chunk - 1) / plan.chunk);
  std::vector<int64_t> next_step(static_cast<size_t>(last), 0);
  std::vector<int> pieces(static_cast<size_t>(last), 0);
  std::vector<bool> slot_used(static_cast<size_t>(ws.split_slots), false);
  for (int64_t item = 0; item < 2 * chunks; ++item) {
    const fa3::BwdPiece piece = fa3::bwd_piece_at(static_cast<int>(item), static_cast<int>(tile_steps),
                                                  static_cast<int>(plan.chunk),
                                                  static_cast<int>(last * tile_steps));
    if (item % 2 == 1) {
      const fa3::BwdPiece first = fa3::bwd_piece_at(static_cast<int>(item - 1), static_cast<int>(tile_steps),
                                                    static_cast<int>(plan.chunk),
                                                    static_cast<int>(last * tile_steps));
      CHECK(first.next_too == (piece.steps > 0));  // the producer's next item
    }
    if (piece.steps == 0) continue;
    REQUIRE(piece.tile >= 0);
    REQUIRE(piece.tile < last);
    CHECK(piece.step0 == next_step[piece.tile]);  // in order, no gap, no overlap
    next_step[piece.tile] += piece.steps;
    ++pieces[piece.tile];
    const int64_t slot = item / 2 + piece.tile;
    REQUIRE(slot < static_cast<int64_t>(ws.split_slots));
    CHECK_FALSE(slot_used[slot]);
    slot_used[slot] = true;
  }
  REQUIRE(last <= static_cast<int64_t>(ws.split_tiles));
  for (int64_t t = 0; t < last; ++t) {
    CHECK(next_step[t] == tile_steps);
    const fa3::BwdSplitParts parts = fa3::bwd_split_parts(static_cast<int>(t), static_cast<int>(tile_steps),
                                                          static_cast<int>(plan.chunk));
    CHECK(parts.last_chunk - parts.first_chunk + 1 == pieces[t]);  // the last piece's count
    CHECK(pieces[t] >= 2);
    CHECK(pieces[t] <= 3);
  }
}

TEST_CASE("backward: the persistent non-causal kernels' split last wave (backward_split_plan)",
          "[cpu][api][runtime]") {
  const fa3::BwdConfig pick =
      fa3::parse_bwd_name("fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_rw_fs_pt").config;
  REQUIRE(pick.splits_last_wave());
  CHECK_FALSE(fa3::parse_bwd_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_fs_pt_causal")
                  .config.splits_last_wave());
  CHECK_FALSE(fa3::parse_bwd_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_fs").config.splits_last_wave());
  // The problem of `tiles` tiles (K/V heads of one 128-key block) of `steps` 80-row blocks.
  auto problem = [](int64_t tiles, int64_t steps) {
    fa3::BackwardProblem prob;
    prob.head_dim = 128;
    prob.batch = 1;
    prob.heads = prob.heads_kv = tiles;
    prob.seqlen_k = 128;
    prob.seqlen_q = 80 * steps;
    return prob;
  };
  // The paper's grid at d128: 2048 tiles on 132 SMs, 15 waves whole and 68 tiles in 132 chunks
  // of just over half a tile; from 2k (1k's tiles of 13 steps go whole, below).
  for (const int64_t s : {2048, 4096, 8192, 16384}) {
    INFO("seqlen " << s);
    fa3::BackwardProblem prob = problem(16, s / 80 + (s % 80 != 0));
    prob.batch = 16384 / s;
    prob.seqlen_k = s;
    const int64_t tiles = prob.batch * 16 * (s / 128), n = (s + 79) / 80;
    const fa3::BackwardSplitPlan plan = fa3::backward_split_plan(pick, prob, tiles, n, 132);
    CHECK(plan.first == 1980);
    CHECK(plan.chunk == std::max((68 * n + 131) / 132, (n + 1) / 2));
    CHECK(plan.draws - plan.first <= 132);
    check_split_plan(plan, tiles, n, 132, fa3::backward_workspace(prob));
  }
  {
    fa3::BackwardProblem prob = problem(16, 13);  // 1k: 2048 tiles of 13 steps
    prob.batch = 16;
    prob.seqlen_k = 1024;
    CHECK(fa3::backward_split_plan(pick, prob, 2048, 13, 132).draws == 2048);
    // The shortest tiles that split.
    prob = problem(200, fa3::kSplitMinTileSteps);
    CHECK(fa3::backward_split_plan(pick, prob, 200, fa3::kSplitMinTileSteps - 1, 132).draws == 200);
    CHECK(fa3::backward_split_plan(pick, prob, 200, fa3::kSplitMinTileSteps, 132).draws > 200);
  }
  // Every shape of a sweep whose plan splits keeps the plan's promises; the others go whole.
  int split = 0;
  for (const int64_t ctas : {132, 114, 60, 7, 2})
    for (int64_t tiles = 1; tiles <= 300; tiles += 7)
      for (const int64_t n : {1, 2, 3, 5, 13, 26, 52, 103, 205, 410}) {
        const fa3::BackwardProblem prob = problem(tiles, n);
        const fa3::BackwardSplitPlan plan = fa3::backward_split_plan(pick, prob, tiles, n, ctas);
        INFO("tiles " << tiles << ", steps " << n << ", CTAs " << ctas);
        if (plan.first == tiles) {
          CHECK(plan.draws == tiles);
          const int64_t last = tiles % ctas;
          const bool worth = last > 0 && n >= fa3::kSplitMinTileSteps &&
                             4 * std::max((last * n + ctas - 1) / ctas, (n + 1) / 2) <= 3 * n;
          CHECK_FALSE(worth);
          continue;
        }
        ++split;
        check_split_plan(plan, tiles, n, ctas, fa3::backward_workspace(prob));
      }
  CHECK(split > 500);
  // No split: deterministic calls (ordered adds), causal kernels, a full last wave, more SMs
  // than the workspace plans for.
  fa3::BackwardProblem det = problem(16, 52);
  det.deterministic = true;
  CHECK(fa3::backward_split_plan(pick, det, 200, 52, 132).draws == 200);
  CHECK(fa3::backward_workspace(det).split_slots == 0u);
  fa3::BwdConfig causal = pick;
  causal.causal = true;
  CHECK(fa3::backward_split_plan(causal, problem(200, 52), 200, 52, 132).draws == 200);
  CHECK(fa3::backward_split_plan(pick, problem(264, 52), 264, 52, 132).draws == 264);
  // 68 tiles of 52 steps in chunks of 27: 131 chunks.
  CHECK(fa3::backward_split_plan(pick, problem(200, 52), 200, 52, 132).draws == 132 + 131);
  // 100 tiles on 200 CTAs would need 299 slots, of the workspace's 2 x 144.
  CHECK(fa3::backward_split_plan(pick, problem(300, 52), 300, 52, 200).draws == 300);
  // A d64 kernel that could split (the lab's _dqq_rw_pt) splits only where its key has the
  // regions (a compiled d64 kernel splits: the lab build), else takes its tiles whole.
  const fa3::BwdConfig d64 = fa3::parse_bwd_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_pt").config;
  REQUIRE(d64.splits_last_wave());
  fa3::BackwardProblem prob64 = problem(200, 52);
  prob64.head_dim = 64;
  CHECK(fa3::backward_split_plan(d64, prob64, 200, 52, 132).draws ==
        (fa3::backward_key_splits(fa3::DType::BF16, 64) ? 132 + 131 : 200));
  // Arguments below 1: no plan, every tile whole (no division by zero CTAs, no plan from
  // negative counts).
  for (const auto& [tiles, steps, ctas] : {std::tuple<int64_t, int64_t, int64_t>{200, 52, 0},
                                           {200, 52, -7}, {0, 52, 132}, {-5, 52, 132},
                                           {-1, 52, 132}, {200, 0, 132}}) {
    INFO("tiles " << tiles << ", tile_steps " << steps << ", ctas " << ctas);
    const fa3::BackwardSplitPlan plan =
        fa3::backward_split_plan(pick, problem(200, 52), tiles, steps, ctas);
    CHECK(plan.first == tiles);
    CHECK(plan.draws == tiles);
    CHECK(plan.chunk == 0);
  }
  // Every compiled kernel that splits finds the regions in a default-mode call of its key (a
  // pick whose key had none would never split).
  int splitting = 0;
  for (const fa3::KernelInfo& k : fa3::compiled_backward_kernels()) {
    if (!k.bwd.splits_last_wave()) continue;
    INFO(k.name);
    ++splitting;
    fa3::BackwardProblem own = problem(200, 52);
    own.dtype = k.bwd.dtype;
    own.head_dim = k.bwd.head_dim;
    CHECK(fa3::backward_workspace(own).split_slots > 0u);
  }
  CHECK(splitting >= 2);  // the d128 non-causal picks from 1024 query rows (f16, bf16)
}

TEST_CASE("backward: a split last wave reaches the kernel (BwdParams::split_first)",
          "[cpu][api][runtime]") {
  FakeHandle fh;  // 132 SMs
  Args a;
  // d128 non-causal from 1024 query rows: the persistent _dqt_rw_fs_pt pick; 2 x 2 pairs of 9
  // blocks of 128 keys (1100 keys): 36 tiles of 4 heads x 14 80-row blocks, all in the
  // partial wave: chunks of 28 steps (half a tile), 72 of them.
  for (fa3_tensor* t : {&a.q, &a.k, &a.v, &a.o, &a.dout, &a.dq, &a.dk, &a.dv}) {
    t->seqlen = 1100;
    t->stride_batch = 1100 * t->stride_seq;
  }
  a.p.causal = 0;
  a.workspace = nullptr;
  REQUIRE(a.run(fh.h) == FA3_OK);
  const fa3::BwdParams p = last_params();
  CHECK(p.num_tiles == 36);
  CHECK(p.split_first == 0);
  CHECK(p.split_chunk == 28);
  CHECK(p.split_draws == 72);
  CHECK(fake().launch_grids() == "14 72 14 ");
  fa3::BackwardProblem prob;
  REQUIRE_FALSE(a.check(&prob).failed());
  const fa3::BackwardWorkspace w = fa3::backward_workspace(prob);
  CHECK(w.split_slots == 108u);  // 3 x 36 tiles
  CHECK(address_of(p.dkv_partial) - address_of(p.lse_log2) == w.dkv_partial);
  CHECK(address_of(p.split_counters) - address_of(p.lse_log2) == w.split_counters);
  // The deterministic mode takes the tiles whole.
  a.p.deterministic = 1;
  fake().reset();
  REQUIRE(a.run(fh.h) == FA3_OK);
  CHECK(last_params().split_first == 36);
  CHECK(last_params().split_draws == 36);
  CHECK(fake().launch_grids() == "14 36 14 ");
}

TEST_CASE("backward: the handle's workspace grows per stream and is freed with the handle",
          "[cpu][api][runtime]") {
  FakeHandle fh;
  Args a;
  a.workspace = nullptr;
  a.workspace_bytes = 12345;  // ignored without a workspace
  void* const stream = reinterpret_cast<void*>(0x10);
  REQUIRE(a.run(fh.h, stream) == FA3_OK);
  CHECK(fake().count("cuMemAlloc") == 1);
  CHECK(fake().allocated_bytes(0) == granules(workspace_of(a)));
  CHECK(fake().count("cuStreamSynchronize") == 0);  // nothing to wait for before the first
  CHECK(fake().count("cuLaunchKernelEx") == 3);
  const fa3::BwdParams p = last_params();
  const uintptr_t first = address_of(p.lse_log2);
  CHECK(first % fa3::kWorkspaceAlignment == 0);
  fa3::BackwardProblem prob;
  REQUIRE_FALSE(Args(a).check(&prob).failed());
  CHECK(address_of(p.dq_accum) - first == fa3::backward_workspace(prob).dq_accum);
  CHECK(address_of(p.dq_semaphore) - first == fa3::backward_workspace(prob).dq_semaphore);

  // Smaller and equal problems on the same stream reuse it.
  REQUIRE(a.run(fh.h, stream) == FA3_OK);
  Args small = a;
  for (fa3_tensor* t : small.like_q()) t->seqlen = 10;
  REQUIRE(small.run(fh.h, stream) == FA3_OK);
  CHECK(fake().count("cuMemAlloc") == 1);
  CHECK(address_of(last_params().lse_log2) == first);

  // A larger one: wait for the stream, free, allocate; in that order, before any launch of it.
  Args large = with_4000_query_rows(a);
  const std::string before = fake().calls();
  REQUIRE(large.run(fh.h, stream) == FA3_OK);
  const std::string grown = fake().calls().substr(before.size());
  const size_t sync = grown.find("cuStreamSynchronize;"), freed = grown.find("cuMemFree;"),
               alloc = grown.find("cuMemAlloc;"), launch = grown.find("cuLaunchKernelEx;");
  REQUIRE(sync != std::string::npos);
  CHECK(sync < freed);
  CHECK(freed < alloc);
  CHECK(alloc < launch);
  CHECK(fake().allocated_bytes(1) == granules(workspace_of(large)));
  CHECK(fake().allocated_bytes(1) > fake().allocated_bytes(0));

  // Another stream, while the first one's call has not run, gets one of its own (streams may
  // run at once); the first stream keeps its large one.
  fake().set_stream_busy(stream, 1);
  REQUIRE(a.run(fh.h, reinterpret_cast<void*>(0x20)) == FA3_OK);
  CHECK(fake().count("cuMemAlloc") == 3);
  CHECK(fake().allocated_bytes(2) == granules(workspace_of(a)));
  REQUIRE(a.run(fh.h, stream) == FA3_OK);
  CHECK(fake().count("cuMemAlloc") == 3);
  // A caller's workspace leaves the handle's alone.
  a.workspace = reinterpret_cast<void*>(kWorkspace);
  a.workspace_bytes = kArgsWorkspaceBytes;
  REQUIRE(a.run(fh.h, stream) == FA3_OK);
  CHECK(fake().count("cuMemAlloc") == 3);
  CHECK(address_of(last_params().lse_log2) == kWorkspace);

  const size_t frees = fake().count("cuMemFree");
  const int events = fake().live_events();
  fh.destroy();
  CHECK(fake().count("cuMemFree") == frees + 2);  // the two live workspaces
  CHECK(fake().live_events() == events - 2);       // and their events
}

TEST_CASE("backward: a capture on another thread (global mode) survives the handle's "
          "workspace calls",
          "[cpu][api][runtime]") {
  // cuEventQuery, cuMemAlloc, cuMemFree and cuStreamSynchronize are what a global-mode capture
  // elsewhere forbids (PyTorch's default); the handle makes them in relaxed mode.
  FakeHandle fh;
  Args a;
  a.workspace = nullptr;
  Args large = with_4000_query_rows(a);
  fake().set_foreign_capture(1);
  REQUIRE(a.run(fh.h, stream_at(0x7001)) == FA3_OK);      // an event, a workspace
  REQUIRE(a.run(fh.h, stream_at(0x7002)) == FA3_OK);      // takes it over (an event query)
  fake().set_stream_busy(stream_at(0x7002), 1);
  REQUIRE(large.run(fh.h, stream_at(0x7002)) == FA3_OK);  // grows it: a stream wait, a free
  CHECK(fake().count("cuEventQuery") >= 1);
  CHECK(fake().count("cuMemAlloc") == 2);
  CHECK(fake().count("cuMemFree") == 1);
  CHECK(fake().count("cuStreamSynchronize") == 1);
  CHECK(fake().foreign_capture_invalidated() == 0);
  CHECK(fake().capture_mode() == CU_STREAM_CAPTURE_MODE_GLOBAL);  // the thread's, restored
  fake().set_stream_busy(stream_at(0x7002), 0);
  fake().set_foreign_capture(0);
}

TEST_CASE("backward: a launch that throws still marks the end of its workspace use",
          "[cpu][api][runtime]") {
  // An exception out of the launch (host memory running out while a failed launch's sentence
  // is built, after the preprocess was launched) must not leave the workspace looking idle
  // to other streams while that kernel may still use it.
  FakeHandle fh;
  fa3::ContextScope scope(fh.h);
  REQUIRE_FALSE(scope.error().failed());
  auto on = [](uintptr_t n) { return static_cast<CUstream>(stream_at(n)); };
  // The workspace a call on stream n gets (a use that succeeds).
  auto workspace_of_call = [&](uintptr_t n) {
    CUdeviceptr used = 0;
    CHECK_FALSE(fa3::with_stream_workspace(fh.h, scope.context(), on(n), 4096, [&](CUdeviceptr base) {
                  used = base;
                  return fa3::Error::ok();
                }).failed());
    return used;
  };
  CUdeviceptr first = 0;
  const size_t records = fake().count("cuEventRecord");
  CHECK_THROWS_AS(fa3::with_stream_workspace(fh.h, scope.context(), on(0x8001), 4096,
                                             [&](CUdeviceptr base) -> fa3::Error {
                                               first = base;
                                               throw std::bad_alloc();
                                             }),
                  std::bad_alloc);
  CHECK(first != 0);
  CHECK(fake().count("cuEventRecord") == records + 1);  // recorded on the way out
  fake().set_stream_busy(stream_at(0x8001), 1);         // its work still running
  const CUdeviceptr second = workspace_of_call(0x8002);
  CHECK(second != 0);
  CHECK(second != first);
  // Once that work has run, the first workspace is idle again.
  fake().set_stream_busy(stream_at(0x8001), 0);
  fake().set_stream_busy(stream_at(0x8002), 1);
  CHECK(workspace_of_call(0x8003) == first);
  fake().set_stream_busy(stream_at(0x8002), 0);
}

TEST_CASE("backward: a stream takes over a handle's workspace whose last call has run",
          "[cpu][api][runtime]") {
  FakeHandle fh;
  Args a;
  a.workspace = nullptr;
  Args large = with_4000_query_rows(a);
  auto workspace_used = [] { return address_of(last_params().lse_log2); };
  // A stream per call, each dropped after it (as a caller making streams on the fly): when
  // the last call has run, the next stream takes its workspace: one in all, no waiting.
  for (uintptr_t n = 1; n <= 100; ++n) REQUIRE(a.run(fh.h, stream_at(0x1000 + n)) == FA3_OK);
  CHECK(fake().count("cuMemAlloc") == 1);
  CHECK(fake().count("cuEventCreate") == 1);
  CHECK(fake().count("cuEventRecord") == 100);  // after each call, on its stream
  CHECK(fake().count("cuStreamSynchronize") == 0);
  CHECK(fh.h->workspaces.size() == 1);
  const uintptr_t small_one = workspace_used();

  // Busy streams keep theirs: a new stream gets a new one, which it then keeps while busy.
  fake().set_stream_busy(stream_at(0x1064), 1);  // the last of the 100
  REQUIRE(large.run(fh.h, stream_at(0x2000)) == FA3_OK);
  CHECK(fake().count("cuMemAlloc") == 2);
  const uintptr_t large_one = workspace_used();
  CHECK(large_one != small_one);
  fake().set_stream_busy(stream_at(0x2000), 1);
  REQUIRE(a.run(fh.h, stream_at(0x1064)) == FA3_OK);  // its own, though busy: stream order
  CHECK(workspace_used() == small_one);
  REQUIRE(a.run(fh.h, stream_at(0x3000)) == FA3_OK);  // both busy: a third
  CHECK(fake().count("cuMemAlloc") == 3);
  CHECK(fake().count("cuEventCreate") == 3);

  // Of the idle ones, the first large enough; a too small idle one is grown without waiting
  // (its last call has run); both free the old buffer before allocating.
  fake().set_stream_busy(stream_at(0x1064), 0);
  fake().set_stream_busy(stream_at(0x2000), 0);
  fake().set_stream_busy(stream_at(0x3000), 1);
  REQUIRE(large.run(fh.h, stream_at(0x4000)) == FA3_OK);  // the large one, as it is
  CHECK(workspace_used() == large_one);
  CHECK(fake().count("cuMemAlloc") == 3);
  fake().set_stream_busy(stream_at(0x4000), 1);
  const std::string before = fake().calls();
  REQUIRE(large.run(fh.h, stream_at(0x5000)) == FA3_OK);  // the small one, grown
  const std::string grown = fake().calls().substr(before.size());
  CHECK(FakeCuda::count(grown, "cuStreamSynchronize") == 0);
  CHECK(FakeCuda::count(grown, "cuMemFree") == 1);
  CHECK(FakeCuda::count(grown, "cuMemAlloc") == 1);
  CHECK(grown.find("cuMemFree;") < grown.find("cuMemAlloc;"));
  CHECK(fake().allocated_bytes(3) == granules(workspace_of(large)));
  CHECK(fh.h->workspaces.size() == 3);
  // The stream whose workspace was taken over finds another (here a new one: all are busy).
  fake().set_stream_busy(stream_at(0x5000), 1);
  REQUIRE(a.run(fh.h, stream_at(0x1064)) == FA3_OK);
  CHECK(workspace_used() != small_one);
  CHECK(fake().count("cuMemAlloc") == 5);
  CHECK(fh.h->workspaces.size() == 4);

  // A failed record keeps the workspace with its stream (its end is unknown), and says so.
  fake().set_stream_busy(stream_at(0x1064), 0);
  fake().fail("cuEventRecord", CUDA_ERROR_INVALID_HANDLE);
  CHECK(a.run(fh.h, stream_at(0x1064)) == FA3_ERR_CUDA);
  CHECK(std::string(fa3_last_error()) ==
        "recording the end of the handle's workspace use (cuEventRecord; the kernels were "
        "launched) failed: CUDA_ERROR_FAKE (failure injected by the fake driver)");
  fake().fail("", 0);
  const uintptr_t kept = workspace_used();
  for (uintptr_t n : {0x3000, 0x4000, 0x5000}) fake().set_stream_busy(stream_at(n), 0);
  REQUIRE(a.run(fh.h, stream_at(0x6000)) == FA3_OK);
  CHECK(workspace_used() != kept);
  REQUIRE(a.run(fh.h, stream_at(0x1064)) == FA3_OK);  // its own still
  CHECK(workspace_used() == kept);
  CHECK(fake().count("cuMemAlloc") == 5);
  // That call's record succeeded and marks the end of both uses: once it has run, another
  // stream takes the workspace over again (it is not pinned to its stream for good).
  for (uintptr_t n : {0x3000, 0x4000, 0x5000, 0x6000}) fake().set_stream_busy(stream_at(n), 1);
  REQUIRE(a.run(fh.h, stream_at(0x6100)) == FA3_OK);
  CHECK(workspace_used() == kept);
  CHECK(fake().count("cuMemAlloc") == 5);

  // An event that cannot be made: nothing launched, nothing allocated.
  for (uintptr_t n : {0x1064, 0x3000, 0x4000, 0x5000, 0x6000, 0x6100})
    fake().set_stream_busy(stream_at(n), 1);
  fake().fail("cuEventCreate", CUDA_ERROR_OUT_OF_MEMORY);
  const size_t launches = fake().count("cuLaunchKernelEx");
  CHECK(a.run(fh.h, stream_at(0x7000)) == FA3_ERR_OUT_OF_MEMORY);
  CHECK(std::string(fa3_last_error()) ==
        "creating an event for the handle's workspace (cuEventCreate) failed: "
        "CUDA_ERROR_OUT_OF_MEMORY (failure injected by the fake driver)");
  CHECK(fake().count("cuLaunchKernelEx") == launches);
  CHECK(fake().count("cuMemAlloc") == 5);
  fake().fail("", 0);

  const int events = fake().live_events();
  const size_t frees = fake().count("cuMemFree");
  fh.destroy();
  CHECK(fake().count("cuMemFree") == frees + 4);
  CHECK(fake().live_events() == events - 4);
}

TEST_CASE("backward: failures while preparing the handle's workspace launch nothing",
          "[cpu][api][runtime]") {
  FakeHandle fh;
  Args a;
  a.workspace = nullptr;
  void* const stream = reinterpret_cast<void*>(0x30);

  SECTION("out of memory: a sentence, and the next call tries again") {
    fake().fail("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(a.run(fh.h, stream) == FA3_ERR_OUT_OF_MEMORY);
    CHECK(std::string(fa3_last_error()) ==
          "allocating the handle's workspace of " + std::to_string(granules(workspace_of(a))) +
              " bytes (cuMemAlloc; pass a workspace to fa3_backward to manage it yourself) failed: "
              "CUDA_ERROR_OUT_OF_MEMORY (failure injected by the fake driver)");
    CHECK(fake().count("cuLaunchKernelEx") == 0);
    fake().fail("", 0);
    CHECK(a.run(fh.h, stream) == FA3_OK);
    CHECK(fake().count("cuLaunchKernelEx") == 3);
  }
  SECTION("the stream cannot be waited for before growing: the old workspace stays") {
    REQUIRE(a.run(fh.h, stream) == FA3_OK);
    fake().fail("cuStreamSynchronize", CUDA_ERROR_LAUNCH_FAILED);
    Args large = with_4000_query_rows(a);
    const size_t launches = fake().count("cuLaunchKernelEx");
    CHECK(large.run(fh.h, stream) == FA3_ERR_CUDA);
    CHECK(std::string(fa3_last_error()) ==
          "waiting for the stream before growing the handle's workspace (cuStreamSynchronize) "
          "failed: CUDA_ERROR_FAKE (failure injected by the fake driver)");
    CHECK(fake().count("cuLaunchKernelEx") == launches);
    CHECK(fake().count("cuMemFree") == 0);
    CHECK(a.run(fh.h, stream) == FA3_OK);  // the small one still fits the old workspace
    CHECK(fake().count("cuMemAlloc") == 1);
  }
  SECTION("the old workspace cannot be freed: the next call allocates afresh") {
    REQUIRE(a.run(fh.h, stream) == FA3_OK);
    fake().fail("cuMemFree", CUDA_ERROR_INVALID_VALUE);
    Args large = with_4000_query_rows(a);
    CHECK(large.run(fh.h, stream) == FA3_ERR_CUDA);
    CHECK(std::string(fa3_last_error()) ==
          "freeing the handle's old workspace (cuMemFree) failed: CUDA_ERROR_FAKE (failure "
          "injected by the fake driver)");
    fake().fail("", 0);
    CHECK(a.run(fh.h, stream) == FA3_OK);
    CHECK(fake().count("cuMemAlloc") == 2);
  }
  SECTION("the kernel's module cannot be loaded, or the driver refuses a tensor map: the "
          "workspace is not touched") {
    const char* failing = GENERATE("cuModuleLoadData", "cuTensorMapEncodeTiled");
    INFO(failing);
    fake().fail(failing, CUDA_ERROR_INVALID_VALUE);
    CHECK(a.run(fh.h, stream) == (std::string(failing) == "cuTensorMapEncodeTiled"
                                      ? FA3_ERR_INVALID_ARGUMENT
                                      : FA3_ERR_CUDA));
    CHECK(fake().count("cuStreamGetId") == 0);
    CHECK(fake().count("cuMemAlloc") == 0);
    CHECK(fake().count("cuLaunchKernelEx") == 0);
    // Nor, with a workspace to grow, is the stream waited for or the old one freed.
    fake().fail("", 0);
    REQUIRE(a.run(fh.h, stream) == FA3_OK);
    Args large = with_4000_query_rows(a);
    fake().fail("cuTensorMapEncodeTiled", CUDA_ERROR_INVALID_VALUE);
    const std::string before = fake().calls();
    CHECK(large.run(fh.h, stream) == FA3_ERR_INVALID_ARGUMENT);
    const std::string calls = fake().calls().substr(before.size());
    CHECK(FakeCuda::count(calls, "cuStreamSynchronize") == 0);
    CHECK(FakeCuda::count(calls, "cuMemFree") == 0);
    CHECK(FakeCuda::count(calls, "cuMemAlloc") == 0);
  }
  SECTION("the stream is capturing a graph: refused without a workspace, not with one") {
    fake().set_capturing(stream);
    CHECK(a.run(fh.h, stream) == FA3_ERR_INVALID_ARGUMENT);
    CHECK(std::string(fa3_last_error()) ==
          "workspace is NULL but stream is capturing a CUDA graph: the handle's workspace may be "
          "freed or shared after the capture; pass a workspace of fa3_backward_workspace_size "
          "bytes that lives as long as the graph");
    CHECK(fake().count("cuMemAlloc") == 0);
    CHECK(fake().count("cuLaunchKernelEx") == 0);
    // Also when the stream already has a workspace large enough.
    fake().set_capturing(nullptr);
    REQUIRE(a.run(fh.h, stream) == FA3_OK);
    fake().set_capturing(stream);
    const size_t launches = fake().count("cuLaunchKernelEx");
    CHECK(a.run(fh.h, stream) == FA3_ERR_INVALID_ARGUMENT);
    CHECK(fake().count("cuLaunchKernelEx") == launches);
    // Another stream captures nothing; a caller's workspace is the caller's to keep.
    CHECK(a.run(fh.h, reinterpret_cast<void*>(0x38)) == FA3_OK);
    a.workspace = reinterpret_cast<void*>(kWorkspace);
    a.workspace_bytes = kArgsWorkspaceBytes;
    CHECK(a.run(fh.h, stream) == FA3_OK);
    CHECK(fake().count("cuLaunchKernelEx") == launches + 6);
  }
  SECTION("whether the stream captures cannot be asked") {
    fake().fail("cuStreamIsCapturing", CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CHECK(a.run(fh.h, stream) == FA3_ERR_CUDA);
    CHECK(std::string(fa3_last_error()) ==
          "asking whether the stream is capturing (cuStreamIsCapturing) failed: CUDA_ERROR_FAKE "
          "(failure injected by the fake driver)");
    CHECK(fake().count("cuMemAlloc") == 0);
    CHECK(fake().count("cuLaunchKernelEx") == 0);
  }
  SECTION("the stream cannot be identified") {
    fake().fail("cuStreamGetId", CUDA_ERROR_INVALID_HANDLE);
    CHECK(a.run(fh.h, stream) == FA3_ERR_CUDA);
    CHECK(std::string(fa3_last_error()) ==
          "identifying the stream (cuStreamGetId) failed: CUDA_ERROR_FAKE (failure injected by "
          "the fake driver)");
    CHECK(fake().count("cuMemAlloc") == 0);
    CHECK(fake().count("cuLaunchKernelEx") == 0);
  }
}

TEST_CASE("backward: concurrent calls on one handle get one workspace per stream",
          "[cpu][api][runtime]") {
  FakeHandle fh;
  constexpr int kThreads = 8;
  // Work that never runs: no stream takes over another's workspace.
  for (int t = 0; t < kThreads / 2; ++t)
    fake().set_stream_busy(reinterpret_cast<void*>(static_cast<uintptr_t>(0x100 + t)), 1);
  std::vector<std::thread> threads;
  std::vector<fa3_status> status(kThreads, FA3_ERR_INTERNAL);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Args a;
      a.workspace = nullptr;
      // Each thread's stream sees growing problems; two threads share each stream.
      void* stream = reinterpret_cast<void*>(static_cast<uintptr_t>(0x100 + t / 2));
      for (int i = 0; i < 10; ++i) {
        for (fa3_tensor* x : a.like_q()) {
          x->seqlen = 100 + 1000 * i;
          x->stride_batch = x->seqlen * 8 * 128;
        }
        status[static_cast<size_t>(t)] = a.run(fh.h, stream);
        if (status[static_cast<size_t>(t)] != FA3_OK) return;
      }
    });
  for (std::thread& t : threads) t.join();
  for (fa3_status s : status) CHECK(s == FA3_OK);
  CHECK(fake().count("cuLaunchKernelEx") == 3 * 10 * kThreads);
  // Every allocation but the first of each stream follows the wait for that stream.
  CHECK(fake().count("cuMemAlloc") == fake().count("cuStreamSynchronize") + kThreads / 2);
  CHECK(fake().count("cuMemFree") == fake().count("cuStreamSynchronize"));
  const size_t allocations = fake().count("cuMemAlloc");
  fh.destroy();
  CHECK(fake().count("cuMemFree") == allocations);  // every workspace freed once
}

// ---- which kernel runs: the tuning table's bwd entry, else the first that fits ------------------

namespace {

// The kernel the handle loaded last (a backward call loads one cubin: its kernel's).
const fa3::KernelInfo* last_loaded(fa3_handle* h) {
  REQUIRE_FALSE(h->loaded.empty());
  return h->loaded.back().kernel;
}

// The built-in table without its bwd entries, in a file removed with the object.
struct ForwardOnlyTable {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("fa3_test_forward_only_" + std::to_string(getpid()) + ".json"))
                         .string();
  ForwardOnlyTable() {
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(fa3::builtin_tuning_table_text());
    nlohmann::ordered_json forward = nlohmann::ordered_json::array();
    for (const auto& e : doc["entries"])
      if (e["match"]["direction"] == "fwd") forward.push_back(e);
    REQUIRE(forward.size() < doc["entries"].size());
    doc["entries"] = forward;
    std::ofstream(path) << doc.dump(2);
  }
  ~ForwardOnlyTable() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("backward: the tuning table's bwd entry picks the kernel; without one the first that fits",
          "[cpu][api][tuning]") {
  fa3::BackwardProblem prob;
  prob.dtype = fa3::DType::BF16;
  prob.head_dim = 64;
  prob.causal = false;
  prob.seqlen_q = prob.seqlen_k = 4096;
  // Two bf16 d64 kernels: the table picks the second in name order for long sequences.
  auto fake_bwd = [](const std::string& name) {
    fa3::KernelInfo k;
    k.name = name;
    k.direction = fa3::Direction::Backward;
    k.bwd = fa3::parse_bwd_kernel_name(name).value();
    return k;
  };
  const std::vector<fa3::KernelInfo> kernels = {fake_bwd("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq"),
                                                fake_bwd("fa3_bwd_bf16_d64_m64_n128_s2_w2")};
  std::vector<fa3::KernelInfo> table_kernels = fa3::compiled_kernels();
  table_kernels.insert(table_kernels.end(), kernels.begin(), kernels.end());
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(fa3::builtin_tuning_table_text());
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const auto& e : doc["entries"])
    if (e["match"]["direction"] == "fwd") entries.push_back(e);
  for (const auto& [lo, hi, kernel] : {std::tuple{1, 2047, kernels[0].name},
                                       std::tuple{2048, 2147483647, kernels[1].name}})
    entries.push_back({{"match", {{"direction", "bwd"}, {"dtype", "bf16"}, {"head_dim", 64},
                                  {"causal", false}, {"seqlen_q", {lo, hi}}}},
                       {"kernel", kernel}});
  doc["entries"] = entries;
  fa3::TuningTable table;
  const fa3::Error parsed = fa3::TuningTable::parse(doc.dump(), "t.json", table_kernels, &table);
  INFO(parsed.message);
  REQUIRE_FALSE(parsed.failed());

  const fa3::KernelInfo* kernel = nullptr;
  REQUIRE_FALSE(fa3::select_backward_kernel(table, kernels, prob, &kernel).failed());
  CHECK(kernel->name == "fa3_bwd_bf16_d64_m64_n128_s2_w2");
  prob.seqlen_q = 2047;
  REQUIRE_FALSE(fa3::select_backward_kernel(table, kernels, prob, &kernel).failed());
  CHECK(kernel->name == "fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq");
  // No bwd entry for the causal key: the first of the list that fits.
  std::vector<fa3::KernelInfo> causal = {fake_bwd("fa3_bwd_bf16_d64_m64_n128_s2_w2_causal"),
                                         fake_bwd("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_causal")};
  prob.causal = true;
  REQUIRE_FALSE(fa3::select_backward_kernel(table, causal, prob, &kernel).failed());
  CHECK(kernel == &causal[0]);
  // ... and none fitting is the fallback's sentence.
  const fa3::Error none = fa3::select_backward_kernel(table, kernels, prob, &kernel);
  CHECK(none.status == FA3_ERR_UNSUPPORTED);
  CHECK(none.message ==
        "no backward kernel for this problem (bf16, head_dim 64, causal) is compiled into this library");
}

TEST_CASE("backward: fa3_backward runs the built-in table's pick, or with a forward-only table "
          "the first compiled kernel that fits",
          "[cpu][api][runtime][tuning]") {
  Args a;
  fa3::BackwardProblem prob;
  REQUIRE_FALSE(a.check(&prob).failed());
  const fa3::KernelInfo* first = nullptr;
  REQUIRE_FALSE(fa3::select_backward_kernel(fa3::compiled_backward_kernels(), prob, &first).failed());
  {
    FakeHandle fh;
    REQUIRE(a.run(fh.h) == FA3_OK);
    const fa3::KernelInfo* ran = last_loaded(fh.h);
    // The compiled list's entry of the table's pick (not the table's copy): one load per
    // context whichever way the kernel is named.
    const fa3::KernelInfo* pick = fh.h->table.select(
        {fa3::Direction::Backward, prob.dtype, prob.head_dim, prob.causal, prob.seqlen_q, prob.seqlen_k});
    REQUIRE(pick != nullptr);
    CHECK(ran->name == pick->name);
    CHECK(ran == fa3::find_any_compiled_kernel(pick->name));
    CHECK(ran->name == "fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_fs_pt_causal");
  }
  {
    const ForwardOnlyTable table;
    FakeHandle fh(table.path.c_str());
    CHECK(fh.h->table.select({fa3::Direction::Backward, prob.dtype, prob.head_dim, prob.causal,
                              prob.seqlen_q, prob.seqlen_k}) == nullptr);
    REQUIRE(a.run(fh.h) == FA3_OK);
    CHECK(last_loaded(fh.h) == first);
    CHECK(fake().count("cuLaunchKernelEx") == 3);
  }
}

TEST_CASE("backward: fa3_backward_with_kernel runs the named backward kernel that fits",
          "[cpu][api][runtime]") {
  FakeHandle fh;
  Args a;
  auto run_with = [&](const char* kernel) {
    return fa3_backward_with_kernel(fh.h, kernel, &a.q, &a.k, &a.v, &a.o, &a.dout, a.lse, &a.dq,
                                    &a.dk, &a.dv, a.params, a.workspace, a.workspace_bytes,
                                    nullptr);
  };
  CHECK(run_with(nullptr) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "kernel_name is NULL");
  CHECK(run_with("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_x") == FA3_ERR_UNSUPPORTED);
  CHECK(std::string(fa3_last_error()) ==
        "kernel_name 'fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_x' is not a kernel compiled into this "
        "library (fa3_kernel_name lists them)");
  CHECK(run_with("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh") == FA3_ERR_UNSUPPORTED);  // not causal
  CHECK(std::string(fa3_last_error()) ==
        "kernel fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh is not a backward kernel that fits this "
        "problem (bf16, head_dim 128, causal)");
  const std::string forward = fa3::compiled_kernels().front().name;
  CHECK(run_with(forward.c_str()) == FA3_ERR_UNSUPPORTED);
  CHECK_THAT(std::string(fa3_last_error()), Catch::Contains("is not a backward kernel that fits"));
  CHECK(fake().count("cuLaunchKernelEx") == 0);
  // The arguments are checked first, as fa3_backward's.
  Args bad;
  bad.p.deterministic = 3;
  CHECK(fa3_backward_with_kernel(fh.h, "fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_fs_pt_causal", &bad.q,
                                 &bad.k, &bad.v, &bad.o, &bad.dout, bad.lse, &bad.dq, &bad.dk,
                                 &bad.dv, bad.params, bad.workspace, bad.workspace_bytes,
                                 nullptr) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "p->deterministic must be 0 or 1 (got 3)");

  REQUIRE(run_with("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_fs_pt_causal") == FA3_OK);
  CHECK(last_loaded(fh.h) ==
        fa3::find_any_compiled_kernel("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_fs_pt_causal"));
  CHECK(fake().count("cuLaunchKernelEx") == 3);
  // A kernel the table does not pick for the problem runs when named: d128 non-causal below
  // 1024 query rows the table picks _dqh, and the named _dqt_rw_fs_pt runs instead. (The
  // handle's workspace: a non-causal one has the split regions too.)
  const char* const unpicked = "fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_rw_fs_pt";
  a.p.causal = 0;
  a.workspace = nullptr;
  const fa3::KernelInfo* pick = fh.h->table.select(
      {fa3::Direction::Backward, fa3::DType::BF16, 128, false, a.q.seqlen, a.k.seqlen});
  REQUIRE(pick != nullptr);
  CHECK(pick->name != unpicked);
  fake().reset();
  REQUIRE(run_with(unpicked) == FA3_OK);
  CHECK(last_loaded(fh.h) == fa3::find_any_compiled_kernel(unpicked));
  CHECK(fake().count("cuLaunchKernelEx") == 3);
}

TEST_CASE("backward: the main kernel's CTA order covers every (K/V block, pair) once",
          "[cpu][api]") {
  // bwd_tile_at maps the 1-D grid onto (n_block, kv_head, batch): a bijection for any section
  // width, a last section narrower than the others included; within a section block n of
  // every pair comes before block n + 1 of any (the longest causal CTAs first), or with
  // shortest_first block n + 1 before block n (causal ordered adds: a query block takes the
  // later K/V blocks' adds first, and a CTA may wait only for CTAs started before it).
  for (int n_blocks : {1, 3, 64})
    for (int heads_kv : {1, 3, 8})
      for (int batch : {1, 5})
        for (int section : {1, 2, 4, 16})
          for (bool shortest_first : {false, true}) {
            const int pairs = heads_kv * batch, ctas = n_blocks * pairs;
            std::vector<int> seen(static_cast<size_t>(ctas), 0);
            int last_n = -1, last_section = -1;
            for (int i = 0; i < ctas; ++i) {
              const fa3::BwdTile t =
                  fa3::bwd_tile_at(i, n_blocks, heads_kv, pairs, section, shortest_first);
              REQUIRE(t.n_block >= 0);
              REQUIRE(t.n_block < n_blocks);
              REQUIRE(t.kv_head >= 0);
              REQUIRE(t.kv_head < heads_kv);
              REQUIRE(t.batch >= 0);
              REQUIRE(t.batch < batch);
              const int pair = t.batch * heads_kv + t.kv_head;
              ++seen[static_cast<size_t>(pair * n_blocks + t.n_block)];
              const int sec = pair / section;
              if (sec == last_section) {
                if (shortest_first) CHECK(t.n_block <= last_n);
                else CHECK(t.n_block >= last_n);
              } else {
                CHECK(sec == last_section + 1);
              }
              last_section = sec;
              last_n = t.n_block;
            }
            for (int n : seen) REQUIRE(n == 1);
          }
}

namespace {

// A bf16 d128 backward problem of `batch` x 16 heads x seqlen (queries and keys), and the
// config of a kernel for it, for the launch rules' tests.
fa3::BackwardProblem d128_problem(int64_t batch, int64_t seqlen) {
  fa3::BackwardProblem prob;
  prob.dtype = fa3::DType::BF16;
  prob.head_dim = 128;
  prob.batch = batch;
  prob.heads = prob.heads_kv = 16;
  prob.seqlen_q = prob.seqlen_k = seqlen;
  return prob;
}

fa3::BwdConfig d128_config(bool causal) {
  fa3::BwdConfig c;
  c.head_dim = 128;
  c.causal = causal;
  return c;
}

}  // namespace

TEST_CASE("backward: causal and deterministic calls order their CTAs in L2-sized sections",
          "[cpu][api]") {
  fa3::BackwardProblem prob = d128_problem(2, 8192);
  fa3::BwdConfig c = d128_config(false);
  CHECK(fa3::backward_l2_section(c, prob) == 1);
  // Sections for the deterministic mode's ordered adds: 8 MiB a pair (Q, dO: 2 MiB each, the
  // dQ accumulator 4 MiB), 4 pairs in 40 MiB, fewer than 8: not halved.
  prob.deterministic = true;
  CHECK(fa3::backward_l2_section(c, prob) == 4);
  c.causal = true;
  CHECK(fa3::backward_l2_section(c, prob) == 4);
  prob.seqlen_q = prob.seqlen_k = 2048;  // 2 MiB a pair: 16 in 40 MiB, halved
  CHECK(fa3::backward_l2_section(c, prob) == 8);
  c.head_dim = prob.head_dim = 256;  // 4 MiB a pair: 8 in 40 MiB, not halved at head dim 256
  CHECK(fa3::backward_l2_section(c, prob) == 8);
  c.head_dim = prob.head_dim = 128;
  prob.deterministic = false;  // the default mode's causal calls: unordered adds, not halved
  CHECK(fa3::backward_l2_section(c, prob) == 16);
  c.first_store = true;
  CHECK(fa3::backward_l2_section(c, prob) == 16);
  c.first_store = false;
  prob.seqlen_q = prob.seqlen_k = 8192;
  CHECK(fa3::backward_l2_section(c, prob) == 4);
  prob.heads = 64;  // GQA 4/1: 32 MiB a pair
  CHECK(fa3::backward_l2_section(c, prob) == 1);
  prob.heads = 16;
  prob.seqlen_q = prob.seqlen_k = 512;  // 0.5 MiB a pair: all 32 pairs fit, 32 is the cap
  c.first_store = true;                  // (unordered adds: not halved)
  CHECK(fa3::backward_l2_section(c, prob) == 32);
  c.first_store = false;  // a small causal call of a kernel without first stores: ordered adds
  CHECK(fa3::backward_l2_section(c, prob) == 16);
  prob.batch = 1;
  prob.heads = prob.heads_kv = 3;  // never more than the pairs there are
  CHECK(fa3::backward_l2_section(c, prob) == 2);
}

TEST_CASE("backward: small causal calls of kernels without first stores take the deterministic "
          "mode's ordered dQ adds",
          "[cpu][api]") {
  fa3::BackwardProblem prob = d128_problem(32, 512);
  fa3::BwdConfig c = d128_config(true);
  CHECK(fa3::backward_ordered_adds(c, prob));
  c.first_store = true;  // _fs: the default mode zeroes no accumulator either
  CHECK_FALSE(fa3::backward_ordered_adds(c, prob));
  prob.deterministic = true;
  CHECK(fa3::backward_ordered_adds(c, prob));
  prob.deterministic = false;
  c.first_store = false;
  prob.seqlen_k = 513;  // both lengths at most 512
  CHECK_FALSE(fa3::backward_ordered_adds(c, prob));
  prob.seqlen_k = 512;
  prob.seqlen_q = 1024;
  CHECK_FALSE(fa3::backward_ordered_adds(c, prob));
  c.head_dim = prob.head_dim = 64;  // at head dim 64 up to 1024
  prob.seqlen_k = 1024;
  CHECK(fa3::backward_ordered_adds(c, prob));
  prob.seqlen_q = 1025;
  CHECK_FALSE(fa3::backward_ordered_adds(c, prob));
  c.head_dim = prob.head_dim = 128;
  prob.seqlen_q = prob.seqlen_k = 512;
  c.causal = false;  // non-causal calls order their adds only when asked to
  CHECK_FALSE(fa3::backward_ordered_adds(c, prob));
  prob.deterministic = true;
  CHECK(fa3::backward_ordered_adds(c, prob));
  prob.seqlen_q = prob.seqlen_k = 16384;
  CHECK(fa3::backward_ordered_adds(c, prob));
  // Their order: K/V block order, but the last K/V block's adds first in deterministic causal
  // calls of the kernels with 128-row query blocks (head dim 64; the public FA3's order); the
  // small causal calls of the default mode take it from 6 query blocks (641 rows) on and keep
  // K/V block order, with the descending walk, below.
  CHECK(fa3::backward_add_order(c, prob) == fa3::kOrderedKvBlocks);
  c.causal = true;
  CHECK(fa3::backward_add_order(c, prob) == fa3::kOrderedKvBlocks);  // 64-row query blocks
  c.block_m = 128;
  c.head_dim = prob.head_dim = 64;
  CHECK(fa3::backward_add_order(c, prob) == fa3::kOrderedLastFirst);
  prob.deterministic = false;
  CHECK(fa3::backward_add_order(c, prob) == 0);
  prob.seqlen_q = prob.seqlen_k = 512;
  CHECK(fa3::backward_add_order(c, prob) == fa3::kOrderedKvBlocks);
  prob.seqlen_q = prob.seqlen_k = 640;  // 5 query blocks
  CHECK(fa3::backward_add_order(c, prob) == fa3::kOrderedKvBlocks);
  prob.seqlen_q = 641;  // 6
  CHECK(fa3::backward_add_order(c, prob) == fa3::kOrderedLastFirst);
  prob.seqlen_q = 1024;
  prob.seqlen_k = 17;
  CHECK(fa3::backward_add_order(c, prob) == fa3::kOrderedLastFirst);
  prob.seqlen_q = 17;
  prob.seqlen_k = 1024;
  CHECK(fa3::backward_add_order(c, prob) == fa3::kOrderedKvBlocks);
  prob.deterministic = true;
  CHECK(fa3::backward_add_order(c, prob) == fa3::kOrderedLastFirst);
}

TEST_CASE("backward: the launch carries the CTA order's section and the ordered adds",
          "[cpu][api][runtime]") {
  FakeHandle fh;
  // Args: batch 2 x 2 K/V heads = 4 pairs of 4 query heads x 100 rows (0.4 MB each): one
  // section of all 4 for causal or deterministic calls, none for the others; and the ordered
  // adds for deterministic calls only (the d128 causal pick has first stores: small causal
  // calls keep the unordered ones), in K/V block order at head dim 128.
  for (int causal : {0, 1})
    for (int deterministic : {0, 1}) {
      Args a;
      a.p.causal = causal;
      a.p.deterministic = deterministic;
      a.workspace = nullptr;  // the handle's, of the size each call needs
      fake().reset();
      REQUIRE(a.run(fh.h) == FA3_OK);
      const fa3::BwdParams p = last_params();
      CHECK(p.l2_section == (causal || deterministic ? 4 : 1));
      CHECK(p.ordered_adds == (deterministic ? fa3::kOrderedKvBlocks : 0));  // head dim 128
    }
}

