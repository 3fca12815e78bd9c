#!/bin/bash
# variant_library.sh VARIANT: build/cubin's production backward cubins replaced by those of
# /tmp/rul/VARIANT (build_variant_cubins.sh), relinked (make, ~5 s) into
# .prev/libfa3_VARIANT.so and .prev/fa3_tests_VARIANT; then the shipped cubins (/tmp/rul/base,
# the same script with no extra options: byte-identical to the Makefile's) put back, relinked,
# and the library compared with the shipped one (.prev/libfa3_v40.so).
set -e
v=$1; cd /work/main
for n in $(cat /tmp/prodbwd.txt); do cp /tmp/rul/$v/$n.cubin build/cubin/$n.cubin; done
find build/cubin -name '*.cubin' -exec touch {} +
make -j2 > /tmp/rul/make_$v.log 2>&1
cp build/libfa3.so .prev/libfa3_$v.so; cp build/fa3_tests .prev/fa3_tests_$v
for n in $(cat /tmp/prodbwd.txt); do cp /tmp/rul/base/$n.cubin build/cubin/$n.cubin; done
find build/cubin -name '*.cubin' -exec touch {} +
make -j2 > /tmp/rul/make_base.log 2>&1
cmp build/libfa3.so .prev/libfa3_v40.so && echo "base restored"
