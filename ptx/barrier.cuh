// Named barriers (bar.sync / bar.arrive, PTX ISA 9.7.13.1). Ids are reserved in one enum
// per kernel family; id 0 is __syncthreads. Thread counts are multiples of 32.
#pragma once

#include <stdint.h>

namespace fa3::ptx {

__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace fa3::ptx
