// Global-memory semaphores between CTAs (PTX ISA, Memory Consistency Model; Data Movement:
// ld with .acquire; Parallel Synchronization: red with .release). Each function is executed by
// ONE THREAD. The backward's dQ-writer adds "using a semaphore" (paper Algorithm 3 line 33):
// the deterministic mode orders the dQ reduce-adds of the K/V blocks of a query block with
// one counter per (query block, head, batch) in the workspace: a CTA waits until the counter
// says it is its turn, adds, waits for the add to complete, then increments the counter. The
// default mode's first store (_fs): the same counter as a ticket (atom) and, once the first
// CTA's store is complete, a ready bit (red).
#pragma once

#include <stdint.h>

namespace fa3::ptx {

// Reads a counter with acquire semantics at GPU scope: what the CTA that released this value
// wrote before the release (its completed bulk reduce-adds included) is visible after it.
__device__ __forceinline__ int32_t ld_acquire_gpu(const int32_t* addr) {
  int32_t value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n"
               : "=r"(value)
               : "l"(reinterpret_cast<uint64_t>(addr))
               : "memory");
  return value;
}

// Adds to a counter with release semantics at GPU scope (no value returned: a red, not an
// atom): everything this thread wrote, or saw completed, before it is visible to a thread
// whose ld_acquire_gpu reads the new value.
__device__ __forceinline__ void red_add_release_gpu(int32_t* addr, int32_t value) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(reinterpret_cast<uint64_t>(addr)),
               "r"(value)
               : "memory");
}

// Adds to a counter and returns its old value, with acquire semantics at GPU scope: when the
// old value holds what a red_add_release_gpu added, what that thread released before it is
// visible after. The backward's first-store tickets (one per query block and CTA step).
__device__ __forceinline__ int32_t atom_add_acquire_gpu(int32_t* addr, int32_t value) {
  int32_t old;
  asm volatile("atom.acquire.gpu.global.add.s32 %0, [%1], %2;\n"
               : "=r"(old)
               : "l"(reinterpret_cast<uint64_t>(addr)), "r"(value)
               : "memory");
  return old;
}

// Adds to a counter and returns its old value, with acquire and release semantics at GPU
// scope: what this thread wrote or saw before it is visible to whoever reads a later value,
// and what the earlier adders released is visible after it. The backward's split tiles: the
// piece that counts last reads the others' partial dK_j and dV_j (bwd_sum_split_tile).
__device__ __forceinline__ int32_t atom_add_acq_rel_gpu(int32_t* addr, int32_t value) {
  int32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n"
               : "=r"(old)
               : "l"(reinterpret_cast<uint64_t>(addr)), "r"(value)
               : "memory");
  return old;
}

}  // namespace fa3::ptx
