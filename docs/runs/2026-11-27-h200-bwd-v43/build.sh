#!/bin/bash
# build.sh OUTDIR "target=source ..." : compiles source config's code under target's name
d=$1; shift; mkdir -p $d; cd /work/main
one() {
  t=${1%%=*}; s=${1##*=}
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v,--warn-on-spills -Iinclude -Isrc -I. -DFA3_KERNEL_NAME=$t -DFA3_LAB_CONFIG_NAME=$s -DFA3_BWD_LAST_FIRST=0 -o $d/$t.cubin src/kernels/bwd.cu > $d/$t.log 2>&1 || echo FAIL $t
  tools/check_ptxas.sh $d/$t.log > /dev/null 2>&1 || echo "PTXAS-CHECK-FAIL $t"
}
export -f one; export d
printf "%s\n" "$@" | xargs -P 2 -I{} bash -c 'one {}'
