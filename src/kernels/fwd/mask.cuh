// Masking of a block of scores: the keys past seqlen_k and, for causal attention, the keys
// after a query's diagonal (bottom-right aligned when seqlen_q != seqlen_k: query row i sees
// keys j <= i + seqlen_k - seqlen_q), and which blocks of a warpgroup's rows need it.
#pragma once

#include <math.h>

#include "kernels/fwd_params.h"
#include "tile/fragment.cuh"

namespace fa3 {

// Sets S to -inf where the key is past seqlen_k or, for causal, after the query's diagonal.
// (N accumulators per thread: block_n / 2, or block_n / 4 for a half-width block.)
// Per row, one bound: element e is masked when its offset from the thread's first key
// (a constant) reaches the row's number of visible keys from there; one compare and one
// select per element (the per-element key and row, two compares and an or were ~3 per
// element, in the step that starts every causal tile).
template <class Tr, int N>
__device__ __forceinline__ void apply_mask(float (&s)[N], const FwdParams& p, int thread_in_wg,
                                           int first_row, int first_key) {
  const int first_thread_key = first_key + tile::AccLayout::col(thread_in_wg, 0);
  int visible[2];  // keys [first_thread_key, first_thread_key + visible[h]) are unmasked
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int key_end = p.seqlen_k;
    if (Tr::kCausal) {
      // Bottom-right aligned: row i sees keys j <= i + seqlen_k - seqlen_q.
      const int row = first_row + tile::AccLayout::row(thread_in_wg, 2 * h);
      key_end = min(key_end, row + 1 + p.seqlen_k - p.seqlen_q);
    }
    visible[h] = key_end - first_thread_key;
  }
#pragma unroll
  for (int e = 0; e < N; ++e)
    if (tile::AccLayout::col_offset(e) >= visible[tile::AccLayout::half(e)]) s[e] = -INFINITY;
}

// How many of a tile's n_blocks key blocks need the mask for the 64 query rows from
// first_row, visited from the last block to the first: the blocks that reach past a row's
// last visible key. Keys [0, visible) are unmasked for every one of those rows.
// (first_row by reference: the caller's copy is a field of its mainloop state, and reading
// it there keeps the compiler's choice of where to compute the count; taken by value, the
// count was recomputed inside the d256 ascending kernels' loops.)
template <class Tr>
__device__ __forceinline__ int masked_blocks(const FwdParams& p, const int& first_row,
                                             int n_blocks) {
  int visible = p.seqlen_k;
  if (Tr::kCausal) visible = min(visible, first_row + 1 + p.seqlen_k - p.seqlen_q);
  const int unmasked_blocks = visible > 0 ? visible / Tr::kBlockN : 0;
  return n_blocks - min(n_blocks, unmasked_blocks);
}

// Whether every key in the upper half of block n_block is masked for all 64 rows from
// first_row (after the last row's causal diagonal, or past seqlen_k).
template <class Tr>
__device__ __forceinline__ bool upper_half_masked(const FwdParams& p, const int& first_row,
                                                  int n_block) {
  const int first_upper_key = n_block * Tr::kBlockN + Tr::kBlockN / 2;
  const int last_row = first_row + static_cast<int>(Tr::kRowsPerWarpgroup) - 1;
  return first_upper_key >= p.seqlen_k ||
         (Tr::kCausal && first_upper_key > last_row + p.seqlen_k - p.seqlen_q);
}

}  // namespace fa3
