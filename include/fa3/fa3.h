/* fa3: FlashAttention-3 for NVIDIA Hopper (sm_90a).
 *
 * The whole public interface of libfa3. All tensor data pointers are device pointers.
 * Every function returns a status; on failure fa3_last_error() holds one sentence that
 * names the argument and the rule it broke. After a failed check nothing is launched and
 * no output buffer is touched.
 */
#ifndef FA3_FA3_H
#define FA3_FA3_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FA3_VERSION_MAJOR 0
#define FA3_VERSION_MINOR 1

typedef struct fa3_handle fa3_handle;

typedef enum {
  FA3_OK = 0,
  FA3_ERR_INVALID_ARGUMENT,
  FA3_ERR_UNSUPPORTED,
  FA3_ERR_NO_DRIVER,
  FA3_ERR_NO_DEVICE,
  FA3_ERR_ARCH,
  FA3_ERR_TUNING_TABLE,
  FA3_ERR_CUDA,
  FA3_ERR_OUT_OF_MEMORY,
  FA3_ERR_INTERNAL
} fa3_status;

typedef enum { FA3_F16, FA3_BF16, FA3_E4M3, FA3_F32 } fa3_dtype;

/* Logical shape (batch, seqlen, heads, head_dim). Strides are in elements; head_dim is
 * contiguous. Q, K and V may be views into one packed buffer (e.g. (B, S, 3, H, D)). */
typedef struct {
  void* data;
  fa3_dtype dtype;
  int64_t batch, seqlen, heads, head_dim;
  int64_t stride_batch, stride_seq, stride_head;
} fa3_tensor;

typedef struct {
  float softmax_scale; /* 0 means 1/sqrt(head_dim); otherwise finite, > 0 and at most
                          FLT_MAX / log2(e), about 2.3587e38 (the kernels scale by
                          softmax_scale * log2(e), a float) */
  int causal;          /* 0 or 1; bottom-right aligned when seqlen_q != seqlen_k (FA2/FA3 rule):
                          query i sees keys j <= i + seqlen_k - seqlen_q */
  /* Fields below were added after the first release; the forward reads none of them, so a
   * caller built against the older, shorter struct keeps working with fa3_forward. */
  int deterministic;   /* backward: 0 (the faster order) or 1 (dQ, dK, dV bitwise identical from
                          run to run: dQ's partial sums are added in a fixed order) */
} fa3_params;

/* Creates a handle for CUDA device `device` (an ordinal as the driver counts them).
 * tuning_table_path: NULL for the built-in table, else a JSON file (schema: docs/tuning_table.md).
 * The handle uses the calling thread's current CUDA context when it belongs to `device`,
 * otherwise the device's primary context (the one the CUDA runtime and PyTorch use). Each
 * context gets the kernels (and tile counters, workspaces) it needs at its first call; a
 * context destroyed, or a primary context reset (cudaDeviceReset), takes its own with it, and
 * the handle serves the contexts that come after. A handle may be used from several threads
 * at once. */
fa3_status fa3_create(fa3_handle** h, int device, const char* tuning_table_path);
/* Unloads the handle's kernels and frees its tile counters and workspaces (those of the
 * device's primary context; a caller-owned context's go with that context) without waiting
 * for the GPU: the work of the calls made with it must have finished first (synchronize their
 * streams, or the device). */
fa3_status fa3_destroy(fa3_handle* h);

/* O = softmax(scale * Q K^T) V, per (batch, head); K/V head of query head i is
 * i / (q->heads / k->heads) (GQA/MQA, no duplication). q, k, v, o: F16 or BF16, all the same;
 * head_dim 64, 128 or 256. Sizes: batch, seqlen and heads from 1 to 2^31 - 1; seqlen_q and
 * seqlen_k at most 2^31 - 256 = 2147483392 (the kernels round them up to whole blocks in 32
 * bits), and for a causal call seqlen_q + seqlen_k at most that too; batch * q->heads *
 * ceil(seqlen_q / 64) at most 2^31 - 1 (FA3_ERR_UNSUPPORTED: the grid).
 * o shares no element with q, k or v (it may be a view of one packed
 * buffer with them, e.g. (B, S, 4, H, D)). lse: NULL or fp32 (batch, heads, seqlen_q)
 * contiguous, sharing no memory with q, k, v or o; the natural log-sum-exp of the scaled
 * scores, within 1e-4 of float64; rows with nothing to attend get O = 0 and LSE = -inf. Kernels that sum the softmax rows on the tensor cores (names with
 * _ls, picked for d64/d128) serve calls with lse NULL; a call with an lse runs the kernel's
 * twin without _ls, which sums them in fp32. O may then differ in its last bits between a call
 * with and one without lse (both meet the same error bound; each is deterministic).
 * p: NULL means {0, 0}. stream: a CUstream / cudaStream_t of the handle's device, or NULL for
 * the legacy default stream. Asynchronous: no synchronization. Kernels that draw their tiles
 * (names with _dy, and the persistent causal ones, _ps..._causal: the built-in table's causal
 * picks) keep a 4-byte tile counter per (context, stream): the first such
 * call on a stream takes one from a 4 KB block the handle allocates (cuMemAlloc, zeroed on a
 * stream of the handle's own and waited for: no work of the caller's is waited on) once per
 * 1024 streams of a context and frees at fa3_destroy (a caller-owned
 * context's block goes with that context); no other forward call allocates. CUDA graphs: such
 * a call is captured on a stream the caller created (not the NULL, legacy or per-thread
 * stream) once the context has made one such call outside any capture (else
 * FA3_ERR_INVALID_ARGUMENT): the graph uses the counter the stream got then, or a spare one of
 * the block for a stream first used in the capture (streams are told apart by their handle
 * during a capture: one at the address of an earlier, destroyed stream gets that stream's
 * counter). Replays of graphs that share a counter must not run at the same time as each
 * other or as fa3_forward calls on that stream. A graph holds the handle's kernels and
 * counters: replay it only while the handle lives (fa3_destroy unloads and frees them). */
fa3_status fa3_forward(fa3_handle* h, const fa3_tensor* q, const fa3_tensor* k,
                       const fa3_tensor* v, fa3_tensor* o, float* lse,
                       const fa3_params* p, void* stream);

/* Backward (paper Algorithm 3): dq, dk, dv from q, k, v, the forward's o and lse, and dout
 * (the gradient of the loss with respect to o). q, k, v, o, dout, dq, dk, dv: the dtype and
 * shapes of fa3_forward (dq and o like q, dout like o, dk and dv like k and v), any strides it
 * accepts (e.g. views into packed buffers); head_dim 64, 128 or 256. Sizes: fa3_forward's
 * 2^31 - 1 and 2^31 - 256 bounds (not its causal sum); batch and q->heads at most 65535 (the
 * preprocess's and postprocess's grids) and k->batch * k->heads * ceil(seqlen_k / 64) at
 * most 2^31 - 1 (the main grid): FA3_ERR_UNSUPPORTED. dq, dk and dv share no
 * memory with an input, each other or the workspace. lse: the fp32 (batch, heads, seqlen_q)
 * that fa3_forward wrote for this o. GQA/MQA: dk and dv are summed over the query heads of
 * each K/V head's group. p: as fa3_forward's (NULL means {0, 0, 0}); p->deterministic picks
 * the fixed reduction order.
 * workspace: device memory of at least fa3_backward_workspace_size bytes, 256-byte aligned,
 * not used by anything else until the call's work has run on `stream`; or NULL (then
 * workspace_bytes is ignored), and the handle uses workspaces of its own: the stream's last
 * one, else one whose last call has run on the GPU (an event recorded after each call
 * tells), else a new one. So it holds about as many as streams have backward calls in
 * flight at once, not one per stream ever used; they grow as needed and are freed at
 * fa3_destroy (a caller-owned context's with that context). That call may allocate device
 * memory (cuMemAlloc) and synchronize the stream first, and is refused while the stream is
 * capturing a CUDA graph (pass a workspace that lives as long as the graph). Asynchronous
 * otherwise. Nothing is launched, no output is
 * touched and the handle's workspace is not grown after a failed check. */
fa3_status fa3_backward(fa3_handle* h, const fa3_tensor* q, const fa3_tensor* k,
                        const fa3_tensor* v, const fa3_tensor* o, const fa3_tensor* dout,
                        const float* lse, fa3_tensor* dq, fa3_tensor* dk, fa3_tensor* dv,
                        const fa3_params* p, void* workspace, size_t workspace_bytes,
                        void* stream);

/* The workspace fa3_backward needs for this problem, in *bytes (the same argument checks on
 * q, k and p). */
fa3_status fa3_backward_workspace_size(fa3_handle* h, const fa3_tensor* q, const fa3_tensor* k,
                                       const fa3_params* p, size_t* bytes);

const char* fa3_status_string(fa3_status s);
/* Thread-local, human-readable detail of this thread's last failure ("" if none). */
const char* fa3_last_error(void);

/* ---- Kernels and the tuning table ------------------------------------------------ */

/* The kernels compiled into this library, by their extern "C" names (which encode their
 * config, e.g. "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_os_qr_causal"): the
 * forward kernels, then the backward kernels (fa3_bwd_..., whose cubins also hold <name>_pre
 * and <name>_post).
 * index in [0, fa3_kernel_count()). */
int fa3_kernel_count(void);
const char* fa3_kernel_name(int index);
/* The sm_90a cubin of a compiled kernel (for SASS inspection: build/fa3-sass, docs/fa3_sass.md).
 * FA3_ERR_INVALID_ARGUMENT for a NULL argument or a name that is not compiled in. */
fa3_status fa3_kernel_cubin(const char* kernel_name, const void** data, size_t* size);

/* Validates a tuning-table JSON file without a GPU or driver: FA3_OK, or
 * FA3_ERR_TUNING_TABLE with the file, the entry and the reason in fa3_last_error()
 * (FA3_ERR_INVALID_ARGUMENT for a NULL path). */
fa3_status fa3_tuning_table_validate(const char* path);

/* The kernel the handle's tuning table picks for this forward problem (same argument
 * checks as fa3_forward), as a call without an lse runs it (with an lse, an _ls pick runs its
 * twin without _ls). *kernel_name stays valid for the life of the library. */
fa3_status fa3_forward_select(fa3_handle* h, const fa3_tensor* q, const fa3_tensor* k,
                              const fa3_tensor* v, const fa3_params* p,
                              const char** kernel_name);

/* fa3_forward with a named kernel instead of the tuning table's pick (benchmarks, tuning,
 * tests). FA3_ERR_UNSUPPORTED when the kernel is not compiled in or does not fit the problem
 * (dtype, head_dim, causal). With an lse, an _ls kernel is replaced by its twin without _ls
 * (see fa3_forward); FA3_ERR_UNSUPPORTED when that twin is not compiled in. */
fa3_status fa3_forward_with_kernel(fa3_handle* h, const char* kernel_name,
                                   const fa3_tensor* q, const fa3_tensor* k,
                                   const fa3_tensor* v, fa3_tensor* o, float* lse,
                                   const fa3_params* p, void* stream);

/* fa3_backward with a named backward kernel (fa3_bwd_...) instead of the tuning table's pick
 * (benchmarks, tuning, tests): the same arguments, checks and workspace rules.
 * FA3_ERR_UNSUPPORTED when the kernel is not compiled in, is not a backward kernel, or does
 * not fit the problem (dtype, head_dim, causal). */
fa3_status fa3_backward_with_kernel(fa3_handle* h, const char* kernel_name,
                                    const fa3_tensor* q, const fa3_tensor* k,
                                    const fa3_tensor* v, const fa3_tensor* o,
                                    const fa3_tensor* dout, const float* lse, fa3_tensor* dq,
                                    fa3_tensor* dk, fa3_tensor* dv, const fa3_params* p,
                                    void* workspace, size_t workspace_bytes, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* FA3_FA3_H */
