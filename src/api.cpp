// The C API of include/fa3/fa3.h: argument checks, then the runtime. Every entry point
// clears this thread's last error, and on failure records one sentence for fa3_last_error().
#include <exception>
#include <new>

#include "fa3/fa3.h"
#include "runtime/backward_launch.h"
#include "runtime/backward_problem.h"
#include "runtime/error.h"
#include "runtime/forward_launch.h"
#include "runtime/forward_problem.h"
#include "runtime/handle.h"
#include "runtime/kernel_registry.h"
#include "runtime/tuning_table.h"

using fa3::Error;
using fa3::make_error;

namespace {

fa3_status fail(const Error& e) { return fa3::set_last_error(e); }

// A *_with_kernel call's kernel_name that names no compiled kernel.
Error not_compiled(const char* kernel_name) {
  return make_error(FA3_ERR_UNSUPPORTED,
                    std::string("kernel_name '") + kernel_name +
                        "' is not a kernel compiled into this library (fa3_kernel_name lists them)");
}

fa3_status fail(fa3_status status, const std::string& message) {
  return fa3::set_last_error(make_error(status, message));
}

// Runs an API body; no exception crosses the C boundary. The handlers throw nothing (a
// std::string built there could throw bad_alloc out of the C function).
template <class Body>
fa3_status guarded(Body body) {
  fa3::clear_last_error();
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fa3::set_last_error_nothrow(FA3_ERR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& ex) {
    return fa3::set_last_error_nothrow(FA3_ERR_INTERNAL, "internal error: ", ex.what());
  } catch (...) {
    return fa3::set_last_error_nothrow(FA3_ERR_INTERNAL, "internal error: unknown exception");
  }
}

fa3::ProblemKey key_of(const fa3::ForwardProblem& prob) {
  return {fa3::Direction::Forward, prob.dtype, prob.head_dim, prob.causal, prob.seqlen_q,
          prob.seqlen_k};
}

// Checks shared by fa3_forward and fa3_forward_with_kernel.
Error check_call(fa3_handle* h, const fa3_tensor* q, const fa3_tensor* k, const fa3_tensor* v,
                 const fa3_tensor* o, const float* lse, const fa3_params* p,
                 fa3::ForwardProblem* prob) {
  if (!h) return make_error(FA3_ERR_INVALID_ARGUMENT, "h is NULL: create a handle with fa3_create");
  return fa3::check_forward(q, k, v, o, lse, p, prob);
}

Error select_kernel(fa3_handle* h, const fa3::ForwardProblem& prob, const fa3::KernelInfo** out) {
  const fa3::KernelInfo* pick = h->table.select(key_of(prob));
  if (!pick)
    return make_error(FA3_ERR_TUNING_TABLE,
                      "the tuning table has no kernel for this problem (a validated table covers every supported problem; this is a bug)");
  // The library's entry, not the table's copy: fa3_forward_select's name lives as long as the
  // library (the table dies with the handle), and a kernel is loaded once per context whether
  // the table or fa3_forward_with_kernel names it.
  *out = fa3::find_compiled_kernel(pick->name);
  if (!*out)
    return make_error(FA3_ERR_INTERNAL, "the tuning table's kernel " + pick->name +
                                            " is not compiled into this library (a validated "
                                            "table names compiled kernels only; this is a bug)");
  return Error::ok();
}

// Launches `kernel`, or its twin without the row sums by the PV GEMM when the call asks for
// the LSE (fa3::kernel_for_call).
Error forward_with(fa3_handle* h, const fa3::KernelInfo& kernel, const fa3::ForwardProblem& prob,
                   const fa3_tensor* q, const fa3_tensor* k, const fa3_tensor* v, fa3_tensor* o,
                   float* lse, void* stream) {
  const fa3::KernelInfo* run = fa3::kernel_for_call(kernel, lse != nullptr, fa3::compiled_kernels());
  if (!run)
    return make_error(FA3_ERR_UNSUPPORTED,
                      "lse is not NULL, and kernel " + kernel.name +
                          " sums the softmax rows by the PV GEMM (_ls, exact for O, not for the "
                          "LSE), and none of its twins without _ls, which would compute the LSE, "
                          "is compiled into this library");
  return fa3::launch_forward(h, *run, prob, *q, *k, *v, *o, lse, static_cast<CUstream>(stream));
}

}  // namespace

extern "C" {

fa3_status fa3_create(fa3_handle** h, int device, const char* tuning_table_path) {
  return guarded([&] {
    if (!h) return fail(FA3_ERR_INVALID_ARGUMENT, "h is NULL: pass the address of a fa3_handle*");
    *h = nullptr;
    Error e = fa3::create_handle(device, tuning_table_path, h);
    return e.failed() ? fail(e) : FA3_OK;
  });
}

fa3_status fa3_destroy(fa3_handle* h) {
  return guarded([&] {
    if (!h) return fail(FA3_ERR_INVALID_ARGUMENT, "h is NULL: nothing to destroy");
    fa3::destroy_handle(h);
    return FA3_OK;
  });
}

fa3_status fa3_forward(fa3_handle* h, const fa3_tensor* q, const fa3_tensor* k,
                       const fa3_tensor* v, fa3_tensor* o, float* lse, const fa3_params* p,
                       void* stream) {
  return guarded([&] {
    fa3::ForwardProblem prob;
    Error e = check_call(h, q, k, v, o, lse, p, &prob);
    const fa3::KernelInfo* kernel = nullptr;
    if (!e.failed()) e = select_kernel(h, prob, &kernel);
    if (!e.failed()) e = forward_with(h, *kernel, prob, q, k, v, o, lse, stream);
    return e.failed() ? fail(e) : FA3_OK;
  });
}

fa3_status fa3_forward_select(fa3_handle* h, const fa3_tensor* q, const fa3_tensor* k,
                              const fa3_tensor* v, const fa3_params* p,
                              const char** kernel_name) {
  return guarded([&] {
    if (!kernel_name) return fail(FA3_ERR_INVALID_ARGUMENT, "kernel_name is NULL");
    if (!h) return fail(FA3_ERR_INVALID_ARGUMENT, "h is NULL: create a handle with fa3_create");
    fa3::ForwardProblem prob;
    Error e = fa3::check_forward_inputs(q, k, v, p, &prob);
    const fa3::KernelInfo* kernel = nullptr;
    if (!e.failed()) e = select_kernel(h, prob, &kernel);
    if (e.failed()) return fail(e);
    *kernel_name = kernel->name.c_str();
    return FA3_OK;
  });
}

fa3_status fa3_forward_with_kernel(fa3_handle* h, const char* kernel_name, const fa3_tensor* q,
                                   const fa3_tensor* k, const fa3_tensor* v, fa3_tensor* o,
                                   float* lse, const fa3_params* p, void* stream) {
  return guarded([&] {
    if (!kernel_name) return fail(FA3_ERR_INVALID_ARGUMENT, "kernel_name is NULL");
    fa3::ForwardProblem prob;
    Error e = check_call(h, q, k, v, o, lse, p, &prob);
    if (e.failed()) return fail(e);
    const fa3::KernelInfo* kernel = fa3::find_any_compiled_kernel(kernel_name);
    if (!kernel) return fail(not_compiled(kernel_name));
    if (kernel->direction != fa3::Direction::Forward)
      return fail(FA3_ERR_UNSUPPORTED, std::string("kernel ") + kernel_name +
                                           " is a backward kernel; fa3_forward_with_kernel runs "
                                           "forward kernels (fa3_fwd_...)");
    if (!fa3::fwd_config_fits(kernel->fwd, prob))
      return fail(FA3_ERR_UNSUPPORTED,
                  std::string("kernel ") + kernel_name + " does not fit this problem (" +
                      fa3::problem_text(prob) + ")");
    e = forward_with(h, *kernel, prob, q, k, v, o, lse, stream);
    return e.failed() ? fail(e) : FA3_OK;
  });
}

}  // extern "C"

namespace {

// The kernel fa3_backward_with_kernel names: a compiled backward kernel that fits the problem.
Error named_backward_kernel(const char* kernel_name, const fa3::BackwardProblem& prob,
                            const fa3::KernelInfo** out) {
  const fa3::KernelInfo* kernel = fa3::find_any_compiled_kernel(kernel_name);
  if (!kernel) return not_compiled(kernel_name);
  if (kernel->direction != fa3::Direction::Backward || !fa3::bwd_config_fits(kernel->bwd, prob))
    return make_error(FA3_ERR_UNSUPPORTED,
                      std::string("kernel ") + kernel_name +
                          " is not a backward kernel that fits this problem (" +
                          fa3::problem_text(prob) + ")");
  *out = kernel;
  return Error::ok();
}

// The body of fa3_backward and fa3_backward_with_kernel (run guarded): `kernel_name` NULL runs
// the tuning table's pick.
fa3_status backward(fa3_handle* h, const char* kernel_name, const fa3_tensor* q,
                    const fa3_tensor* k, const fa3_tensor* v, const fa3_tensor* o,
                    const fa3_tensor* dout, const float* lse, fa3_tensor* dq, fa3_tensor* dk,
                    fa3_tensor* dv, const fa3_params* p, void* workspace, size_t workspace_bytes,
                    void* stream) {
  if (!h) return fail(FA3_ERR_INVALID_ARGUMENT, "h is NULL: create a handle with fa3_create");
  fa3::BackwardProblem prob;
  Error e = fa3::check_backward(q, k, v, o, dout, lse, dq, dk, dv, p, &prob);
  if (!e.failed())
    e = fa3::check_backward_workspace(prob, workspace, workspace_bytes, q, k, v, o, dout, lse,
                                      dq, dk, dv);
  const fa3::KernelInfo* kernel = nullptr;
  if (!e.failed())
    e = kernel_name ? named_backward_kernel(kernel_name, prob, &kernel)
                    : fa3::select_backward_kernel(h->table, fa3::compiled_backward_kernels(),
                                                  prob, &kernel);
  if (e.failed()) return fail(e);
  fa3::ContextScope scope(h);
  if (scope.error().failed()) return fail(scope.error());
  // Everything that can fail before the launches (loading the module, the tensor maps) runs
  // before the handle's workspace may grow for the call.
  fa3::BackwardCall call;
  e = fa3::prepare_backward(h, scope.context(), *kernel, prob, *q, *k, *v, *o, *dout, lse, *dq,
                            *dk, *dv, &call);
  if (e.failed()) return fail(e);
  const CUstream s = static_cast<CUstream>(stream);
  const auto launch = [&](CUdeviceptr w) { return fa3::launch_backward(h, prob, call, w, s); };
  if (workspace)
    e = launch(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(workspace)));
  else
    e = fa3::with_stream_workspace(h, scope.context(), s, fa3::backward_workspace(prob).total,
                                   launch);
  return e.failed() ? fail(e) : FA3_OK;
}

}  // namespace

extern "C" {

fa3_status fa3_backward(fa3_handle* h, const fa3_tensor* q, const fa3_tensor* k,
                        const fa3_tensor* v, const fa3_tensor* o, const fa3_tensor* dout,
                        const float* lse, fa3_tensor* dq, fa3_tensor* dk, fa3_tensor* dv,
                        const fa3_params* p, void* workspace, size_t workspace_bytes,
                        void* stream) {
  return guarded([&] {
    return backward(h, nullptr, q, k, v, o, dout, lse, dq, dk, dv, p, workspace,
                    workspace_bytes, stream);
  });
}

fa3_status fa3_backward_with_kernel(fa3_handle* h, const char* kernel_name, const fa3_tensor* q,
                                    const fa3_tensor* k, const fa3_tensor* v, const fa3_tensor* o,
                                    const fa3_tensor* dout, const float* lse, fa3_tensor* dq,
                                    fa3_tensor* dk, fa3_tensor* dv, const fa3_params* p,
                                    void* workspace, size_t workspace_bytes, void* stream) {
  return guarded([&] {
    if (!kernel_name) return fail(FA3_ERR_INVALID_ARGUMENT, "kernel_name is NULL");
    return backward(h, kernel_name, q, k, v, o, dout, lse, dq, dk, dv, p, workspace,
                    workspace_bytes, stream);
  });
}

fa3_status fa3_backward_workspace_size(fa3_handle* h, const fa3_tensor* q, const fa3_tensor* k,
                                       const fa3_params* p, size_t* bytes) {
  return guarded([&] {
    if (!bytes)
      return fail(FA3_ERR_INVALID_ARGUMENT, "bytes is NULL: pass the address of a size_t");
    if (!h) return fail(FA3_ERR_INVALID_ARGUMENT, "h is NULL: create a handle with fa3_create");
    fa3::BackwardProblem prob;
    Error e = fa3::check_backward_inputs(q, k, p, &prob);
    if (e.failed()) return fail(e);
    *bytes = fa3::backward_workspace(prob).total;
    return FA3_OK;
  });
}

const char* fa3_status_string(fa3_status s) {
  switch (s) {
    case FA3_OK: return "FA3_OK";
    case FA3_ERR_INVALID_ARGUMENT: return "FA3_ERR_INVALID_ARGUMENT";
    case FA3_ERR_UNSUPPORTED: return "FA3_ERR_UNSUPPORTED";
    case FA3_ERR_NO_DRIVER: return "FA3_ERR_NO_DRIVER";
    case FA3_ERR_NO_DEVICE: return "FA3_ERR_NO_DEVICE";
    case FA3_ERR_ARCH: return "FA3_ERR_ARCH";
    case FA3_ERR_TUNING_TABLE: return "FA3_ERR_TUNING_TABLE";
    case FA3_ERR_CUDA: return "FA3_ERR_CUDA";
    case FA3_ERR_OUT_OF_MEMORY: return "FA3_ERR_OUT_OF_MEMORY";
    case FA3_ERR_INTERNAL: return "FA3_ERR_INTERNAL";
  }
  return "unknown fa3_status";
}

const char* fa3_last_error(void) { return fa3::last_error_text(); }

// (The kernel lists are built on first use: their allocations may throw, which must not cross
// the C boundary.)
int fa3_kernel_count(void) {
  int count = 0;
  guarded([&] {
    count = static_cast<int>(fa3::all_compiled_kernels().size());
    return FA3_OK;
  });
  return count;
}

const char* fa3_kernel_name(int index) {
  const char* name = nullptr;
  guarded([&] {
    const auto& kernels = fa3::all_compiled_kernels();
    if (index >= 0 && index < static_cast<int>(kernels.size()))
      name = kernels[static_cast<size_t>(index)]->name.c_str();
    return FA3_OK;
  });
  return name;
}

fa3_status fa3_kernel_cubin(const char* kernel_name, const void** data, size_t* size) {
  return guarded([&] {
    if (!kernel_name || !data || !size)
      return fail(FA3_ERR_INVALID_ARGUMENT, "kernel_name, data and size must not be NULL");
    const fa3::KernelInfo* kernel = fa3::find_any_compiled_kernel(kernel_name);
    if (!kernel)
      return fail(FA3_ERR_INVALID_ARGUMENT, std::string("kernel_name '") + kernel_name +
                                                "' is not a kernel compiled into this library");
    *data = kernel->cubin;
    *size = kernel->cubin_size;
    return FA3_OK;
  });
}

fa3_status fa3_tuning_table_validate(const char* path) {
  return guarded([&] {
    if (!path) return fail(FA3_ERR_INVALID_ARGUMENT, "path is NULL: pass a tuning-table JSON file");
    fa3::TuningTable table;
    Error e = fa3::TuningTable::load_file(path, fa3::compiled_forward_and_backward_kernels(), &table);
    return e.failed() ? fail(e) : FA3_OK;
  });
}

}  // extern "C"
