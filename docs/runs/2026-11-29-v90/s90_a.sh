#!/bin/bash
# v90, call 1: the split last wave of the persistent non-causal kernels (d128 _dqt_rw_fs_pt):
# the _pt walk test, every backward GPU test but [large]; an A/B against v84's cubins
# (.prev/libfa3_v87host.so) at d128 non-causal (the changed pick) and d128 causal (unchanged
# kernels, as a control) in one process per dtype, the order rotating; the SASS of four
# kernels against HEAD's (.prev/head_cubins): the unchanged kernels should read the same.
# Carry build/libfa3.so, build/fa3_tests, .prev/libfa3_v87host.so, .prev/head_cubins, .anchors.
cd "$(dirname "$0")/../../.."
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests .prev/libfa3_v87host.so
for c in .prev/head_cubins/*.cubin; do
  n=$(basename "$c" .cubin)
  cuobjdump -sass "$c" | grep -v '^\s*$' | sed 's@/\*[0-9a-f]*\*/@@' > /tmp/old.sass
  cuobjdump -sass "build/cubin/$n.cubin" 2>/dev/null | grep -v '^\s*$' | sed 's@/\*[0-9a-f]*\*/@@' > /tmp/new.sass
  echo "$n: $(wc -l < /tmp/old.sass) -> $(wc -l < /tmp/new.sass) lines, $(diff /tmp/old.sass /tmp/new.sass | grep -c '^[<>]') differ" >> "$OUT/sass_diff.log"
done
cat "$OUT/sass_diff.log"
pt_walk_first || exit 1
step bwd_tests 290 build/fa3_tests '[gpu][backward]~[large]'
ab_bwd ab .prev/libfa3_v87host.so 128 0,1 1024,2048,4096,8192,16384 6
