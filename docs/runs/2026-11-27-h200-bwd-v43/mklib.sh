#!/bin/bash
# mklib.sh VARIANT: build/libfa3.so and fa3_tests with the VARIANT table -> .prev/*_VARIANT
set -e; cd /work/main; v=$1
python3 /tmp/dq1/mktable.py $v
make -j2 > /tmp/dq1/make_$v.log 2>&1 || { tail -30 /tmp/dq1/make_$v.log; exit 1; }
cp build/libfa3.so .prev/libfa3_$v.so; cp build/fa3_tests .prev/fa3_tests_$v
