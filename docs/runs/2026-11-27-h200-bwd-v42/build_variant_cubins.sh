#!/bin/bash
# build_variant_cubins.sh OUTDIR "PTXAS_EXTRA": the 16 production backward cubins (names, one a
# line, in /tmp/prodbwd.txt: kernels.mk's BWD_KERNELS) compiled with the Makefile's command
# plus extra ptxas options (e.g. ",--register-usage-level=10") and, from $NVEXTRA, extra nvcc
# options (e.g. "-ftz=true"); each log checked by tools/check_ptxas.sh. Ran here (2 cores,
# ~10 s for the 16).
d=$1; extra=$2; mkdir -p $d
one() {
  n=$1; lf=0; case $n in *d64*causal) lf=1;; esac
  nvcc -std=c++17 -O3 $NVEXTRA -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v,--warn-on-spills$extra -I/work/main/include -I/work/main/src -I/work/main -DFA3_KERNEL_NAME=$n -DFA3_BWD_LAST_FIRST=$lf -o $d/$n.cubin /work/main/src/kernels/bwd.cu > $d/$n.log 2>&1 || echo FAIL $n
  /work/main/tools/check_ptxas.sh $d/$n.log > /dev/null 2>&1 || echo "PTXAS-CHECK-FAIL $n"
}
export -f one; export d extra
xargs -P 2 -I{} bash -c 'one {}' < /tmp/prodbwd.txt
