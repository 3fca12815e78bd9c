// Grid dependency control (PTX ISA griddepcontrol, sm_90): programmatic dependent launch. A grid
// launched with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION may start before the
// stream's previous grid has completed; these two instructions order the pair. Without the
// attribute both are no-ops, so a kernel that uses them runs correctly either way.
#pragma once

namespace fa3::ptx {

// Blocks the calling thread until every prerequisite grid has completed and its memory
// operations are performed and visible to this grid. Every thread that reads what the
// previous grid wrote (or writes what it reads) must pass it first.
__device__ __forceinline__ void griddepcontrol_wait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

// Lets the dependent grid be scheduled once every CTA of this grid has executed it or exited.
// Says nothing about this grid's memory: the dependent still passes griddepcontrol_wait.
__device__ __forceinline__ void griddepcontrol_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

}  // namespace fa3::ptx
