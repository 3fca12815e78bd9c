#!/bin/bash
# session 54, v54a: K_j and V_j released apart in the d128 _pt kernels (BwdConfig::kv_released_apart).
#   s54b.sh a: the _pt walk test (a wrong barrier count hangs: 120 s), the A/B against v53d's library
#              (.prev/libfa3.so) at d128, both masks, 1k-16k; the A/B of d128 causal 8k-16k on
#              _pt (.prev/pt8k/libfa3.so: this build with the table's _pt causal range to 65535)
#              against this build's _p32; then (not with `a quick`) the backward GPU tests
#   s54b.sh b: the sanitizers on [backward][sanitize], fa3-sass on the backward kernels
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh  # gpu_run_header, step, pt_walk_first, ab_bwd
gpu_run_header build/libfa3.so .prev/libfa3.so .prev/pt8k/libfa3.so
if [ "$1" = a ]; then
  pt_walk_first || exit 1
  ab_bwd ab_v53d .prev/libfa3.so 128 0,1 1024,2048,4096,8192,16384 8
  ab_bwd ab_pt8k .prev/pt8k/libfa3.so 128 1 8192,16384 8
  [ "$2" = quick ] || step tests 230 build/fa3_tests '[gpu][backward]~[large]'
else
  step sanitize 300 env SANITIZE_FILTER='[backward][sanitize]' tools/sanitize.sh build/fa3_tests
  step sass_bwd 40 build/fa3-sass --lib build/libfa3.so 'fa3_bwd_*'
fi
cd "$OUT" && tar czf "run_$1.tgz" --remove-files -- *.log *.txt */ 2>/dev/null; ls "$OUT"
